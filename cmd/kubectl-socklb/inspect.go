package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
)

func newInspectCommand(o *options) *cobra.Command {
	var node, output string
	cmd := &cobra.Command{
		Use:   "inspect [SERVICE]",
		Short: "print one node's maps as kube-proxy's chains (socklb inspect in its agent pod)",
		Long: `kubectl socklb inspect runs "socklb inspect" in the agent pod of --node (needed when
socklb runs on more than one node) and prints every Service port with its
endpoints, their share and counters. SERVICE (NAME or NAMESPACE/NAME) limits it
to one Service.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "chain" && output != "json" {
				return fmt.Errorf("-o %q: unknown output format; use chain or json", output)
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			pods, err := c.agentPods(cmd.Context())
			if err != nil {
				return err
			}
			p, err := podOnNode(pods, node)
			if err != nil {
				return err
			}
			if err := runnable(p); err != nil {
				return err
			}
			return c.inspect(cmd.Context(), p, output, args, o.streams.Out, o.streams.ErrOut)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "the node whose agent to ask (default: the only one)")
	cmd.Flags().StringVarP(&output, "output", "o", "chain", "output format: chain or json")
	return cmd
}

// inspect runs socklb inspect in p on the agent's own pin directory,
// which socklb status reads from the agent (a --config file may set it).
func (c *cluster) inspect(ctx context.Context, p *corev1.Pod, output string, args []string, stdout, stderr io.Writer) error {
	bpffs, err := c.agentPins(ctx, p)
	if err != nil {
		return err
	}
	command := append([]string{"/socklb", "inspect", "--bpffs-path=" + bpffs, "-o", output}, args...)
	if err := c.run(ctx, p, command, stdout, stderr); err != nil {
		return fmt.Errorf("%v in pod %s/%s on node %s: %w", command, p.Namespace, p.Name, p.Spec.NodeName, err)
	}
	return nil
}
