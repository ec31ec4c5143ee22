package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/socklb/socklb/pkg/datapath"
)

func newCleanupCommand() *cobra.Command {
	var bpffs string
	var force bool
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
			if len(res.PutBack) > 0 {
				fmt.Fprintf(out, "removed socklb's links and maps under %s, but the running agent (%s) pinned its own again in %s while cleanup ran: "+
					"its hooks are attached again. Stop the agent to remove them for good.\n", bpffs, res.Holder, strings.Join(res.PutBack, ", "))
				return nil
			}
			fmt.Fprintf(out, "removed socklb's links and maps under %s; its hooks are detached\n", bpffs)
			if res.Holder != "" {
				fmt.Fprintf(out, "the running agent (%s) will pin and attach them again at its next check: stop it to keep them removed\n", res.Holder)
			}
			return nil
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&bpffs, "bpffs-path", defaultBPFFS, "directory holding socklb's pins")
		fs.BoolVar(&force, "force", false, "remove the pins even while an agent holds them (its hooks are detached under it)")
	})
	return cmd
}
