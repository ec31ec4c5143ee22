package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// SocketTermination says which sockets connected to a removed backend the
// datapath destroys so their applications reconnect to a live one.
type SocketTermination string

const (
	TerminateNone SocketTermination = "none"
	TerminateUDP  SocketTermination = "udp" // connected UDP: DNS clients (the default)
	TerminateAll  SocketTermination = "all" // connected UDP and TCP
)

// terminator walks the sockets of every network namespace in use by a
// process of the hooked cgroup with BPF socket iterators, destroying the
// ones socklb connected to a removed backend.
type terminator struct {
	objs   socklbbpf.SocktermObjects
	tcp    *link.Iter
	udp    *link.Iter
	cgroup string
	// lister finds the namespaces with one walk of the task list; nil
	// when it could not load (listErr says why): /proc is read instead.
	lister  *netnsLister
	listErr error
}

func newTerminator(cfg Config, shared *socklbbpf.SocklbMaps) (*terminator, error) {
	mode, cgroup := cfg.TerminateSockets, cfg.CgroupPath
	spec, err := socklbbpf.LoadSockterm()
	if err != nil {
		return nil, fmt.Errorf("reading embedded socket iterator object: %w", err)
	}
	applySizes(spec.Maps, cfg)
	t := &terminator{cgroup: cgroup}
	err = spec.LoadAndAssign(&t.objs, &ebpf.CollectionOptions{MapReplacements: stateMaps(shared)})
	if err != nil {
		return nil, fmt.Errorf("loading socket iterators (they need Linux 6.5+ for the bpf_sock_destroy kfunc; --terminate-sockets=none silences this): %w", err)
	}
	if t.udp, err = link.AttachIter(link.IterOptions{Program: t.objs.SocklbDestroyUdp}); err != nil {
		t.Close()
		return nil, fmt.Errorf("creating the UDP socket iterator: %w", err)
	}
	if mode == TerminateAll {
		if t.tcp, err = link.AttachIter(link.IterOptions{Program: t.objs.SocklbDestroyTcp}); err != nil {
			t.Close()
			return nil, fmt.Errorf("creating the TCP socket iterator: %w", err)
		}
	}
	if cfg.disabled(FeatureTaskIter) {
		t.listErr = errDisabled
	} else {
		t.lister, t.listErr = newNetnsLister(cgroup)
	}
	return t, nil
}

func (t *terminator) Close() error {
	for _, l := range []*link.Iter{t.udp, t.tcp} {
		if l != nil {
			l.Close()
		}
	}
	if t.lister != nil {
		t.lister.Close()
	}
	return t.objs.Close()
}

// SocketScan is what one sync's search for the sockets of removed
// endpoints took: finding the network namespaces, then walking their
// sockets.
type SocketScan struct {
	Namespaces    int
	Listing, Walk time.Duration
	// SlowListing is why this sync's namespaces came from /proc though
	// the task walk was loaded (nil: they did not).
	SlowListing error
}

// destroy destroys the sockets connected to targets, in every network
// namespace a process of the cgroup lives in, and returns how many it
// destroyed.
func (t *terminator) destroy(targets []socklbbpf.SocktermSockTarget) (int, SocketScan, error) {
	var scan SocketScan
	if len(targets) == 0 {
		return 0, scan, nil
	}
	one := uint8(1)
	for _, k := range targets {
		if err := t.objs.SockTargets.Put(k, one); err != nil {
			return 0, scan, fmt.Errorf("writing socket targets: %w", err)
		}
	}
	defer func() {
		for _, k := range targets {
			_ = t.objs.SockTargets.Delete(k)
		}
	}()
	before := t.destroyed()
	var errs []error
	start := time.Now()
	namespaces, slow := t.namespaces()
	listed := time.Now()
	for _, ns := range namespaces {
		if err := t.walk(ns); err != nil {
			errs = append(errs, err)
		}
	}
	scan = SocketScan{Namespaces: len(namespaces), Listing: listed.Sub(start), Walk: time.Since(listed), SlowListing: slow}
	return int(t.destroyed() - before), scan, errors.Join(errs...)
}

func (t *terminator) destroyed() uint64 {
	var sum uint64
	for i := uint32(0); i < 2; i++ {
		var n uint64
		if t.objs.SockDestroyed.Lookup(i, &n) == nil {
			sum += n
		}
	}
	return sum
}

// walk runs the iterators in the network namespace at path. A socket
// iterator sees the namespace of the thread that opens it, so the opening
// happens on a locked thread switched into that namespace.
func (t *terminator) walk(nsPath string) error {
	readers, err := openIn(nsPath, t.udp, t.tcp)
	if err != nil {
		return err
	}
	for _, r := range readers {
		// Reading drives the iteration; the programs print nothing.
		_, _ = io.Copy(io.Discard, r)
		r.Close()
	}
	return nil
}

func openIn(nsPath string, iters ...*link.Iter) ([]io.ReadCloser, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, nil // the process exited: nothing to do there
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("entering network namespace %s: %w", nsPath, err)
	}
	var out []io.ReadCloser
	for _, it := range iters {
		if it == nil {
			continue
		}
		r, err := it.Open()
		if err != nil {
			err = fmt.Errorf("opening socket iterator in %s: %w", nsPath, err)
			if serr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); serr != nil {
				panic(fmt.Sprintf("cannot return to the agent's network namespace: %v", serr))
			}
			return out, err
		}
		out = append(out, r)
	}
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// A thread stuck in a foreign namespace must not serve anything.
		panic(fmt.Sprintf("cannot return to the agent's network namespace: %v", err))
	}
	return out, nil
}

// namespaces lists one /proc/PID/ns/net path per distinct network
// namespace of the processes in the cgroup and its descendants: the
// sockets the hooks could have translated live there. The task walk
// answers when it can; a walk that fails (a namespace map full) leaves
// the answer to /proc for this sync only, and says why.
func (t *terminator) namespaces() ([]string, error) {
	if t.lister == nil {
		return cgroupNamespaces(t.cgroup), nil
	}
	ns, err := t.lister.namespaces()
	if err != nil {
		return cgroupNamespaces(t.cgroup), err
	}
	return ns, nil
}

// cgroupNamespaces lists one /proc/PID/ns/net path per distinct network
// namespace of the processes in cgroup and its descendants.
func cgroupNamespaces(cgroup string) []string {
	seen := map[[2]uint64]bool{}
	var out []string
	_ = filepath.WalkDir(cgroup, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		f, err := os.Open(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			pid, err := strconv.Atoi(sc.Text())
			if err != nil {
				continue
			}
			p := fmt.Sprintf("/proc/%d/ns/net", pid)
			var st unix.Stat_t
			if unix.Stat(p, &st) != nil {
				continue
			}
			id := [2]uint64{st.Dev, st.Ino}
			if !seen[id] {
				seen[id] = true
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}
