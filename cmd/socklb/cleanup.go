package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/socklb/socklb/pkg/datapath"
)

func newCleanupCommand() *cobra.Command {
	var bpffs, unmount string
	var force bool
	var ns hostNamespaces
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "detach the hooks and remove every pin",
		Long:  "socklb cleanup unpins socklb's links and maps, which detaches its hooks: Services are no longer translated on this node.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := datapath.Cleanup(bpffs, force)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case len(res.PutBack) > 0:
				fmt.Fprintf(out, "removed socklb's links and maps under %s, but the running agent (%s) pinned its own again in %s while cleanup ran: "+
					"its hooks are attached again. Stop the agent to remove them for good.\n", bpffs, res.Holder, strings.Join(res.PutBack, ", "))
			case res.Holder != "":
				fmt.Fprintf(out, "removed socklb's links and maps under %s; its hooks are detached\n", bpffs)
				fmt.Fprintf(out, "the running agent (%s) will pin and attach them again at its next check: stop it to keep them removed\n", res.Holder)
			default:
				fmt.Fprintf(out, "removed socklb's links and maps under %s; its hooks are detached\n", bpffs)
			}
			if unmount == "" {
				return nil
			}
			// The agent's --cgroup-path lives under the mount, and
			// HostToContainer would carry the unmount into its pod.
			if res.Holder != "" {
				fmt.Fprintf(out, "left the cgroup2 at %s mounted: the running agent (%s) attaches under it\n", unmount, res.Holder)
				return nil
			}
			return unmountCgroup(out, &ns, unmount)
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&bpffs, "bpffs-path", defaultBPFFS, "directory holding socklb's pins")
		fs.BoolVar(&force, "force", false, "remove the pins even while an agent holds them (its hooks are detached under it)")
		fs.StringVar(&unmount, "unmount-cgroup", "", "also unmount the cgroup2 mount that socklb mount-cgroup made at this directory, and remove the directory (the chart's cleanup mode)")
		fs.StringVar(&ns.mount, "mount-ns", "", mountNSHelp+"; for --unmount-cgroup")
	})
	return cmd
}

// unmountCgroup undoes `socklb mount-cgroup` in the node's mount namespace:
// the cgroup2 mount at dir, then dir and its parent if they are empty.
// bpffs stays: the node's other BPF users share it, as systemd mounts it.
func unmountCgroup(out io.Writer, ns *hostNamespaces, dir string) error {
	if err := ns.enter(out); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "nothing at %s to unmount\n", dir)
		return nil
	} else if err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	// Mounted more than once (a privileged init container's mount
	// propagated back, then another): each unmount uncovers the next.
	for n := 0; st.Type == unix.CGROUP2_SUPER_MAGIC; n++ {
		if err := unix.Unmount(dir, 0); err != nil {
			return fmt.Errorf("unmounting the cgroup2 at %s: %w", dir, err)
		}
		if n == 0 {
			fmt.Fprintf(out, "unmounted the cgroup2 at %s\n", dir)
		}
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("statfs %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err != nil {
		fmt.Fprintf(out, "left the directory %s: %v\n", dir, err)
		return nil
	}
	_ = os.Remove(filepath.Dir(dir)) // /run/socklb, unless something else is in it
	return nil
}
