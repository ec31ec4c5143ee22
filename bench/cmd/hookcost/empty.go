package main

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/datapath"
)

// emptyHook is the floor connect4 is measured against: a connect4 program
// that only lets the connect proceed, on a cgroup of its own (a sibling of
// the lab's, so socklb's hooks do not run there), timed by the same
// bpf_stats. What it costs is the hook's dispatch and the stats' own clock
// reads; what socklb's connect4 costs above it is socklb's work.
type emptyHook struct {
	cg   *lab.Cgroup
	prog *ebpf.Program
	link link.Link
}

func newEmptyHook() (e *emptyHook, err error) {
	e = &emptyHook{}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
		}
	}()
	if e.cg, err = lab.NewCgroup(); err != nil {
		return nil, fmt.Errorf("creating the empty hook's cgroup: %w", err)
	}
	e.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:       "empty_connect4",
		Type:       ebpf.CGroupSockAddr,
		AttachType: ebpf.AttachCGroupInet4Connect,
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 1), // proceed
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("loading the empty connect4 program: %w", err)
	}
	e.link, err = link.AttachCgroup(link.CgroupOptions{Path: e.cg.Path(), Attach: ebpf.AttachCGroupInet4Connect, Program: e.prog})
	if err != nil {
		return nil, fmt.Errorf("attaching the empty connect4 program to %s: %w", e.cg.Path(), err)
	}
	return e, nil
}

func (e *emptyHook) stats() (map[string]progStats, error) {
	return datapath.HookPrograms{"connect4": e.prog}.Stats()
}

func (e *emptyHook) Close() error {
	var errs []error
	if e.link != nil {
		errs = append(errs, e.link.Close())
	}
	if e.prog != nil {
		errs = append(errs, e.prog.Close())
	}
	if e.cg != nil {
		errs = append(errs, e.cg.Close())
	}
	return errors.Join(errs...)
}
