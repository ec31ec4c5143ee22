package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// newPauseCommand is the container of the chart's cleanup mode: its init
// container has cleaned the node, and this one only keeps the pod running,
// so the DaemonSet's rollout says when every node is clean.
func newPauseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pause",
		Short: "wait until terminated (the chart's cleanup mode, once a node is clean)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			fmt.Fprintln(cmd.OutOrStdout(), "this node is clean of socklb; waiting for helm uninstall")
			<-sig
			return nil
		},
	}
}
