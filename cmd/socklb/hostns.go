package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// hostNamespaces names the namespaces the DaemonSet's init and cleanup
// containers mount and unmount in. Entering the node's mount namespace is
// what lets them run without privileged: a mount made there is the node's
// at once, where a mount made in the container reaches the node only
// through Bidirectional propagation, which Kubernetes allows to privileged
// containers alone. Cilium's mount-cgroup init container does the same
// with nsenter.
type hostNamespaces struct {
	// mount is the node's mount namespace. Empty means the parent
	// process's: with hostPID that is the container runtime's shim, whose
	// mount namespace is where the runtime resolves hostPath volumes. PID 1
	// would be wrong wherever the runtime runs in a namespace of its own.
	mount string
	// cgroup is the host's cgroup namespace, so a cgroup2 mount shows the
	// whole tree and not the container's own cgroup; empty: stay in this
	// one (an unmount needs none).
	cgroup string
}

const (
	mountNSHelp  = "the node's mount namespace (default: the parent process's, i.e. the container runtime's under hostPID, where hostPath volumes are resolved)"
	cgroupNSHelp = "the host's cgroup namespace (the DaemonSet has hostPID, so /proc/1 is the host's init)"
)

// enter moves the calling goroutine's thread into the namespaces and keeps
// the goroutine on it; the thread is never handed back to the runtime and
// dies with the process. Only the cgroup namespace may be missing (some
// sandboxes hide init's namespaces even from root), and then only when this
// container already sees the host's cgroup tree, which it notes on out.
func (h *hostNamespaces) enter(out io.Writer) error {
	runtime.LockOSThread()
	mountPath := h.mount
	if mountPath == "" {
		ppid := os.Getppid()
		if ppid <= 0 {
			return errors.New("this process has no visible parent (does the pod have hostPID?): pass --mount-ns /proc/PID/ns/mnt of a process in the node's mount namespace")
		}
		mountPath = fmt.Sprintf("/proc/%d/ns/mnt", ppid)
	}
	// Both are opened before either is entered: after the mount namespace
	// changes, /proc is the node's.
	mnt, err := os.Open(mountPath)
	if err != nil {
		return fmt.Errorf("opening the node's mount namespace %s (the container needs hostPID and CAP_SYS_PTRACE): %w", mountPath, err)
	}
	defer mnt.Close()
	var cg *os.File
	if h.cgroup != "" {
		f, err := os.Open(h.cgroup)
		if err == nil {
			cg = f
			defer f.Close()
		} else if own, oerr := ownCgroup2(); oerr != nil || own == "/" {
			return fmt.Errorf("opening the host's cgroup namespace %s (does the pod have hostPID?): %w; and this container has a cgroup namespace of its own (its cgroup is %q), so mounting from it would cover the container only", h.cgroup, err, own)
		} else {
			// Runtimes on cgroup v1 hosts give containers no cgroup
			// namespace: this one sees the host's tree already.
			fmt.Fprintf(out, "cannot open %s (%v); this container shares the host's cgroup namespace (its cgroup is %s): mounting from it\n", h.cgroup, err, own)
		}
	}
	// setns(CLONE_NEWNS) refuses a thread that shares its filesystem
	// context (root, cwd) with others, as every Go thread does.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing this thread's filesystem context: %w", err)
	}
	if cg != nil {
		if err := unix.Setns(int(cg.Fd()), unix.CLONE_NEWCGROUP); err != nil {
			return fmt.Errorf("entering the host's cgroup namespace %s (the container needs CAP_SYS_ADMIN): %w", h.cgroup, err)
		}
	}
	if err := unix.Setns(int(mnt.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering the node's mount namespace %s (the container needs CAP_SYS_ADMIN and CAP_SYS_CHROOT): %w", mountPath, err)
	}
	return nil
}

// ownCgroup2 is this process's cgroup v2 path as its namespace shows it.
func ownCgroup2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 line in /proc/self/cgroup")
}
