package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// runMountCgroup is the DaemonSet's init container: it mounts the host's
// cgroup2 hierarchy at a directory that propagates to the host, so the
// agent attaches to the host's cgroups and not to its container's. The
// mount is made from the host's cgroup namespace (--cgroup-ns), or its
// root would be the container's own cgroup. It does nothing when cgroup2
// is mounted there already, so a restart keeps the existing mount.
func newMountCgroupCommand() *cobra.Command {
	var cgroupNS string
	cmd := &cobra.Command{
		Use:   "mount-cgroup DIR",
		Short: "mount the host's cgroup2 at DIR (the DaemonSet's init container)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("usage: socklb mount-cgroup [--cgroup-ns PATH] DIR")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error { return mountCgroup(cgroupNS, args[0]) },
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&cgroupNS, "cgroup-ns", "/proc/1/ns/cgroup", "the host's cgroup namespace (the DaemonSet has hostPID, so /proc/1 is the host's init)")
	})
	return cmd
}

func mountCgroup(cgroupNS, dir string) error {
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
	if ns, err := os.Open(cgroupNS); err == nil {
		err = unix.Setns(int(ns.Fd()), unix.CLONE_NEWCGROUP)
		ns.Close()
		if err != nil {
			return fmt.Errorf("entering the host's cgroup namespace %s: %w", cgroupNS, err)
		}
	} else {
		// Some sandboxes hide init's namespaces even from root. A
		// container whose own cgroup is not the root of its namespace
		// sees the host's tree already (runtimes on cgroup v1 hosts give
		// containers no cgroup namespace); one that sees itself at "/"
		// would mount only its own cgroup.
		own, rerr := ownCgroup2()
		if rerr != nil || own == "/" {
			return fmt.Errorf("opening the host's cgroup namespace %s (does the pod have hostPID?): %w; and this container has a cgroup namespace of its own (its cgroup is %q), so mounting from it would cover the container only", cgroupNS, err, own)
		}
		fmt.Printf("cannot open %s (%v); this container shares the host's cgroup namespace (its cgroup is %s): mounting from it\n", cgroupNS, err, own)
	}
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mounting cgroup2 at %s: %w", dir, err)
	}
	fmt.Printf("mounted the host's cgroup2 at %s\n", dir)
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
