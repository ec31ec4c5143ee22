// Command kubectl-socklb is the kubectl plugin for socklb (`kubectl
// socklb ...` once it is on $PATH): it finds the agent pods of a cluster
// and runs socklb's own read-only subcommands in them through the
// pods/exec subresource, as `cilium status` does for Cilium's agents. It
// changes nothing in the cluster.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	cmd := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "kubectl socklb: %v\n", err)
		os.Exit(1)
	}
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	o := &options{flags: flags, streams: streams}
	root := &cobra.Command{
		Use:   "kubectl socklb",
		Short: "look at socklb's agents: status of every node, the chains of one",
		Long: `kubectl socklb finds socklb's agent pods (label app.kubernetes.io/name=socklb,
namespace kube-system unless -n says otherwise) and runs socklb's read-only
subcommands in them.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.selector, "selector", "l", agentSelector, "label selector of the agent pods")
	root.AddCommand(newInspectCommand(o), newStatusCommand(o))
	return root
}
