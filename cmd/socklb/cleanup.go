package main

import (
	"fmt"

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
			if err := datapath.Cleanup(bpffs, force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed socklb's links and maps under %s; its hooks are detached\n", bpffs)
			return nil
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&bpffs, "bpffs-path", defaultBPFFS, "directory holding socklb's pins")
		fs.BoolVar(&force, "force", false, "remove the pins even while an agent holds them (its hooks are detached under it)")
	})
	return cmd
}
