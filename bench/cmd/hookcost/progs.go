package main

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// hookNames are the IPv4 hooks the lab's connects and datagrams run; the
// pinned link of each (pkg/datapath's links/<name>) leads to its program.
var hookNames = []string{"connect4", "sendmsg4", "recvmsg4", "getpeername4"}

// hookProgs opens the programs attached through the pinned links under
// bpffs, the ones the kernel runs, whatever loaded them.
func hookProgs(bpffs string) (map[string]*ebpf.Program, error) {
	progs := map[string]*ebpf.Program{}
	for _, name := range hookNames {
		pin := filepath.Join(bpffs, "links", name)
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			closeProgs(progs)
			return nil, fmt.Errorf("opening the link pinned at %s: %w", pin, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			closeProgs(progs)
			return nil, fmt.Errorf("reading link %s: %w", pin, err)
		}
		p, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			closeProgs(progs)
			return nil, fmt.Errorf("opening program %d of link %s: %w", info.Program, pin, err)
		}
		progs[name] = p
	}
	return progs, nil
}

func closeProgs(progs map[string]*ebpf.Program) {
	for _, p := range progs {
		p.Close()
	}
}

// progStats is one program's cumulative run time and run count.
type progStats struct {
	RunTimeNS uint64 `json:"run_time_ns"`
	RunCount  uint64 `json:"run_cnt"`
}

func readStats(progs map[string]*ebpf.Program) (map[string]progStats, error) {
	out := map[string]progStats{}
	for name, p := range progs {
		s, err := p.Stats()
		if err != nil {
			return nil, fmt.Errorf("reading stats of %s (bpf_stats_enabled needs Linux 5.8): %w", name, err)
		}
		out[name] = progStats{RunTimeNS: uint64(s.Runtime.Nanoseconds()), RunCount: s.RunCount}
	}
	return out, nil
}

// delta is what happened between two readings.
func delta(before, after map[string]progStats) map[string]progStats {
	out := map[string]progStats{}
	for name, a := range after {
		b := before[name]
		out[name] = progStats{RunTimeNS: a.RunTimeNS - b.RunTimeNS, RunCount: a.RunCount - b.RunCount}
	}
	return out
}
