package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// runMountCgroup is the DaemonSet's init container: it mounts the host's
// cgroup2 hierarchy at a directory that propagates to the host, so the
// agent attaches to the host's cgroups and not to its container's. The
// mount is made from the host's cgroup namespace (--cgroup-ns), or its
// root would be the container's own cgroup. It does nothing when cgroup2
// is mounted there already, so a restart keeps the existing mount.
func runMountCgroup(args []string) error {
	fs := flag.NewFlagSet("mount-cgroup", flag.ContinueOnError)
	cgroupNS := fs.String("cgroup-ns", "/proc/1/ns/cgroup", "the host's cgroup namespace (the DaemonSet has hostPID, so /proc/1 is the host's init)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: socklb mount-cgroup [--cgroup-ns PATH] DIR")
	}
	dir := fs.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		fmt.Printf("cgroup2 already mounted at %s\n", dir)
		return nil
	}
	// setns changes the calling thread only: keep this goroutine on it and
	// let the thread die with the process.
	runtime.LockOSThread()
	ns, err := os.Open(*cgroupNS)
	if err != nil {
		return fmt.Errorf("opening the host's cgroup namespace %s (does the pod have hostPID?): %w", *cgroupNS, err)
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("entering the host's cgroup namespace %s: %w", *cgroupNS, err)
	}
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mounting cgroup2 at %s: %w", dir, err)
	}
	fmt.Printf("mounted the host's cgroup2 at %s\n", dir)
	return nil
}
