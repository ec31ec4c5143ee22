package datapath

import (
	"errors"
	"fmt"
	"io"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// netnsLister lists the network namespaces of the hooked cgroup's
// processes with one walk of the kernel's task list (bpf/c/tasknetns.c),
// where reading cgroup.procs and stat'ing every /proc/PID/ns/net costs
// about 10 µs a process: 98 ms a sync at 10 000 processes
// (bench/results/termcost/).
type netnsLister struct {
	objs socklbbpf.TasknetnsObjects
	iter *link.Iter
}

// initPidNS is the initial pid namespace's inode (PROC_PID_INIT_INO):
// the iterator reports pids as that namespace numbers them.
const initPidNS = 0xEFFFFFFC

func newNetnsLister(cgroup string) (*netnsLister, error) {
	var pidns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &pidns); err != nil {
		return nil, fmt.Errorf("reading the agent's pid namespace: %w", err)
	}
	if pidns.Ino != initPidNS {
		return nil, errors.New("the agent is not in the host's pid namespace (hostPID: true), where the task iterator's pids are /proc's")
	}
	var cg unix.Stat_t
	if err := unix.Stat(cgroup, &cg); err != nil {
		return nil, fmt.Errorf("reading the id of cgroup %s: %w", cgroup, err)
	}
	spec, err := socklbbpf.LoadTasknetns()
	if err != nil {
		return nil, fmt.Errorf("reading embedded task iterator object: %w", err)
	}
	if err := spec.Variables["hooked_cgroup"].Set(cg.Ino); err != nil {
		return nil, fmt.Errorf("setting the hooked cgroup's id: %w", err)
	}
	l := &netnsLister{}
	if err := spec.LoadAndAssign(&l.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the task iterator (it needs the bpf_task_under_cgroup kfunc, Linux 6.5+): %w", err)
	}
	if l.iter, err = link.AttachIter(link.IterOptions{Program: l.objs.SocklbListNetns}); err != nil {
		l.Close()
		return nil, fmt.Errorf("creating the task iterator: %w", err)
	}
	return l, nil
}

func (l *netnsLister) Close() error {
	if l.iter != nil {
		l.iter.Close()
	}
	return l.objs.Close()
}

// namespaces walks every task once and returns one /proc/PID/ns/net path
// per network namespace found, emptying the map for the next walk, also
// when this one failed part way.
func (l *netnsLister) namespaces() ([]string, error) {
	r, err := l.iter.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the task iterator: %w", err)
	}
	_, walkErr := io.Copy(io.Discard, r)
	r.Close()
	var (
		inum, pid uint32
		inums     []uint32
		out       []string
	)
	it := l.objs.NetnsPids.Iterate()
	for it.Next(&inum, &pid) {
		inums = append(inums, inum)
		out = append(out, fmt.Sprintf("/proc/%d/ns/net", pid))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the namespaces found: %w", err)
	}
	for _, k := range inums {
		_ = l.objs.NetnsPids.Delete(k)
	}
	if walkErr != nil {
		return nil, fmt.Errorf("walking the tasks: %w", walkErr)
	}
	var full uint32
	if err := l.objs.NetnsFull.Lookup(uint32(0), &full); err != nil {
		return nil, err
	}
	if full != 0 {
		_ = l.objs.NetnsFull.Put(uint32(0), uint32(0))
		return nil, fmt.Errorf("more than %d network namespaces in the cgroup", l.objs.NetnsPids.MaxEntries())
	}
	return out, nil
}
