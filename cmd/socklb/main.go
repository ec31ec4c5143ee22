// Command socklb is the socket-level load balancer for Kubernetes Services:
// one binary for the node agent and the tools that look at what it did.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	cliflag "k8s.io/component-base/cli/flag"
)

func main() {
	cmd := newRootCommand()
	if err := cmd.Execute(); err != nil {
		if errors.As(err, new(errLogged)) {
			os.Exit(1) // the agent's JSON log holds it (logFatal)
		}
		name := "socklb"
		if c, _, ferr := cmd.Find(os.Args[1:]); ferr == nil && c != cmd {
			name += " " + c.Name()
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "socklb",
		Short: "Kubernetes Services at the socket layer, in eBPF",
		Long: `socklb: Kubernetes Services at the socket layer, in eBPF.

Run "socklb <command> -h" for a command's flags, and
"socklb completion bash|zsh|fish|powershell" for shell completion.`,
		// Errors are printed once, by main, naming the command; a
		// validation error is not helped by pages of flags.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %q)", err, c.CommandPath()+" -h")
	})
	root.AddCommand(newAgentCommand(), newInspectCommand(), newStatusCommand(), newCleanupCommand(), newMountCgroupCommand(), newCheckConnectCommand(), newPauseCommand(), newVersionCommand())
	return root
}

// setFlagSets adds grouped flags to cmd and prints them by group in its
// help, as kube-proxy does.
func setFlagSets(cmd *cobra.Command, fss cliflag.NamedFlagSets) {
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	cols, _, err := term.GetSize(int(os.Stdout.Fd()))
	if err != nil {
		cols = 0 // not a terminal: no wrapping
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
}

// singleFlagSet is for the small commands: their flags in one group.
func singleFlagSet(cmd *cobra.Command, add func(fs *pflag.FlagSet)) {
	var fss cliflag.NamedFlagSets
	add(fss.FlagSet(cmd.Name()))
	setFlagSets(cmd, fss)
}
