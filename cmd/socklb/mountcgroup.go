package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// newMountCgroupCommand is the DaemonSet's init container: from the node's
// mount namespace (hostNamespaces) it mounts the host's cgroup2 hierarchy at
// DIR, so the agent attaches to the host's cgroups and not to its
// container's, and a bpf filesystem at --bpffs when the node has none, so
// pins outlive the agent's container. It does nothing where they are
// mounted already, so a restart keeps the existing mounts.
func newMountCgroupCommand() *cobra.Command {
	var ns hostNamespaces
	var bpffs string
	cmd := &cobra.Command{
		Use:   "mount-cgroup DIR",
		Short: "mount the host's cgroup2 at DIR, and bpffs where the node has none (the DaemonSet's init container)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("usage: socklb mount-cgroup [--cgroup-ns PATH] [--mount-ns PATH] [--bpffs DIR] DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if err := ns.enter(out); err != nil {
				return err
			}
			if err := mountIfMissing(out, args[0], "cgroup2", unix.CGROUP2_SUPER_MAGIC, "the host's cgroup2", ""); err != nil {
				return err
			}
			if bpffs == "" {
				return nil
			}
			// mode=0700 as systemd mounts it: without it the root is
			// 1777 and any user of the node could pin there.
			return mountIfMissing(out, bpffs, "bpf", unix.BPF_FS_MAGIC, "a bpf filesystem", "mode=0700")
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&ns.cgroup, "cgroup-ns", "/proc/1/ns/cgroup", cgroupNSHelp)
		fs.StringVar(&ns.mount, "mount-ns", "", mountNSHelp)
		fs.StringVar(&bpffs, "bpffs", "", "also mount a bpf filesystem at this directory unless one is there (the agent's pins live in it)")
	})
	return cmd
}

func mountIfMissing(out io.Writer, dir, fstype string, magic int64, what, data string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == magic {
		fmt.Fprintf(out, "%s already mounted at %s\n", fstype, dir)
		return nil
	}
	if err := unix.Mount(fstype, dir, fstype, 0, data); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", what, dir, err)
	}
	fmt.Fprintf(out, "mounted %s at %s\n", what, dir)
	return nil
}
