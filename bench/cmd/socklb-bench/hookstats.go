package main

import (
	"errors"

	"github.com/socklb/socklb/pkg/datapath"
)

// hookCounter sums socklb's hook counters over the requests it wraps.
// Stats are on only around socklb's own extra round: they cost every BPF
// program on the machine two clock reads per call, and no measured round
// should pay for them.
type hookCounter struct {
	progs datapath.HookPrograms
	sum   map[string]datapath.HookStats
}

func newHookCounter(bpffs string) (*hookCounter, error) {
	progs, err := datapath.OpenHookPrograms(bpffs)
	if err != nil {
		return nil, err
	}
	return &hookCounter{progs: progs, sum: map[string]datapath.HookStats{}}, nil
}

// around runs f with run-time stats on and adds what the hooks did.
func (h *hookCounter) around(f func() error) (err error) {
	on, err := datapath.EnableRunTimeStats()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, on.Close()) }()
	before, err := h.progs.Stats()
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	after, err := h.progs.Stats()
	if err != nil {
		return err
	}
	for name, d := range datapath.SubStats(before, after) {
		s := h.sum[name]
		h.sum[name] = datapath.HookStats{RunTimeNS: s.RunTimeNS + d.RunTimeNS, RunCount: s.RunCount + d.RunCount}
	}
	return nil
}

func (h *hookCounter) result(n int) HookCost {
	out := HookCost{NServices: n, Hooks: map[string]HookCall{}}
	for name, s := range h.sum {
		c := HookCall{RunCount: s.RunCount, RunTimeNS: s.RunTimeNS}
		if ns, ok := s.NSPerCall(); ok {
			c.NSPerCall = fptr(ns)
		}
		out.Hooks[name] = c
	}
	return out
}

func (h *hookCounter) close() { h.progs.Close() }
