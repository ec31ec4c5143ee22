package datapath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// HookStats is one hook program's cumulative run count and run time, as
// the kernel counts them while BPF run-time stats are on (bpf_stats).
type HookStats struct {
	RunTimeNS uint64 `json:"run_time_ns"`
	RunCount  uint64 `json:"run_cnt"`
}

// Sub is what happened between an earlier reading and s.
func (s HookStats) Sub(before HookStats) HookStats {
	return HookStats{RunTimeNS: s.RunTimeNS - before.RunTimeNS, RunCount: s.RunCount - before.RunCount}
}

// NSPerCall is the mean run time of one call, or false with no call.
func (s HookStats) NSPerCall() (float64, bool) {
	if s.RunCount == 0 {
		return 0, false
	}
	return float64(s.RunTimeNS) / float64(s.RunCount), true
}

// HookPrograms are the programs the pinned links of a bpffs directory run:
// the ones the kernel calls, whichever agent loaded them, and still there
// after that agent exited.
type HookPrograms map[string]*ebpf.Program

// HookNames are the hooks socklb attaches, in attach order.
func HookNames() []string {
	out := make([]string, len(hooks))
	for i, h := range hooks {
		out[i] = h.name
	}
	return out
}

// OpenHookPrograms opens the program of each named hook's pinned link
// under bpffs (every attached hook when names is empty: a lazy one may
// not be).
func OpenHookPrograms(bpffs string, names ...string) (HookPrograms, error) {
	all := len(names) == 0
	if all {
		names = HookNames()
	}
	progs := HookPrograms{}
	for i, name := range names {
		pin := filepath.Join(linksDir(bpffs), name)
		if _, err := os.Lstat(pin); all && hooks[i].lazy && errors.Is(err, os.ErrNotExist) {
			continue
		}
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			progs.Close()
			return nil, fmt.Errorf("opening the link pinned at %s (is an agent's datapath there?): %w", pin, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			progs.Close()
			return nil, fmt.Errorf("reading link %s: %w", pin, err)
		}
		p, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			progs.Close()
			return nil, fmt.Errorf("opening program %d of link %s: %w", info.Program, pin, err)
		}
		progs[name] = p
	}
	return progs, nil
}

// Close releases the program handles; the links keep the programs.
func (h HookPrograms) Close() {
	for _, p := range h {
		p.Close()
	}
}

// Stats reads every program's cumulative counters.
func (h HookPrograms) Stats() (map[string]HookStats, error) {
	out := map[string]HookStats{}
	for name, p := range h {
		s, err := p.Stats()
		if err != nil {
			return nil, fmt.Errorf("reading the run-time stats of %s (Linux 5.8+): %w", name, err)
		}
		out[name] = HookStats{RunTimeNS: uint64(s.Runtime / time.Nanosecond), RunCount: s.RunCount}
	}
	return out, nil
}

// SubStats is what happened between two readings of Stats.
func SubStats(before, after map[string]HookStats) map[string]HookStats {
	out := map[string]HookStats{}
	for name, a := range after {
		out[name] = a.Sub(before[name])
	}
	return out
}

// EnableRunTimeStats turns on the kernel's run time and count of every BPF
// program until the returned Closer is closed: the counters cost two clock
// reads per call, so the kernel keeps them off unless someone holds them on.
func EnableRunTimeStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enabling BPF run-time stats (Linux 5.8+, root): %w", err)
	}
	return c, nil
}
