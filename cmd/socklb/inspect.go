package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

func newInspectCommand() *cobra.Command {
	var bpffs, output string
	cmd := &cobra.Command{
		Use:   "inspect [SERVICE]",
		Short: "print the live maps as kube-proxy's chains",
		Long: "socklb inspect reads the pinned maps and prints every frontend with its endpoints and counters, as `iptables -t nat -L -v` shows kube-proxy's chains. " +
			"SERVICE (NAME or NAMESPACE/NAME) limits it to that Service's frontends.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "chain" && output != "json" {
				return fmt.Errorf("-o %q: unknown output format; use chain or json", output)
			}
			svcs, err := datapath.Dump(bpffs)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if svcs = ofService(svcs, args[0]); len(svcs) == 0 {
					return fmt.Errorf("no frontend of Service %q is programmed (NAME matches in any namespace; a Service without a cluster IP, or one another proxy owns, has none)", args[0])
				}
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(svcs)
			case "chain":
				return printChain(cmd.OutOrStdout(), svcs)
			}
			return nil
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&bpffs, "bpffs-path", defaultBPFFS, "directory holding socklb's pins")
		fs.StringVarP(&output, "output", "o", "chain", "output format: chain or json")
	})
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"chain", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// ofService keeps the frontends of one Service, named NAMESPACE/NAME or
// NAME alone (any namespace, as an operator types it first).
func ofService(svcs []datapath.ServiceDump, name string) []datapath.ServiceDump {
	var out []datapath.ServiceDump
	for _, s := range svcs {
		nn := s.Frontend.Service
		if nn.String() == name || (!strings.Contains(name, "/") && nn.Name == name) {
			out = append(out, s)
		}
	}
	return out
}

// printChain prints the maps the way a kube-proxy user reads
// `iptables -t nat -L -v`: each KUBE-SERVICES match, the KUBE-SVC spread
// over its endpoints, and each KUBE-SEP with its counters.
func printChain(w io.Writer, svcs []datapath.ServiceDump) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(svcs) == 0 {
		fmt.Fprintln(tw, "no services programmed")
	}
	for _, s := range svcs {
		fe := s.Frontend
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s:%s\t%s\tsvc %d, generation %d\n", fe.Key, fe.Kind, family(fe), fe.Service, fe.PortName, attributes(fe), s.ID, s.Generation)
		if s.Via != nil {
			fmt.Fprintf(tw, "    a node address: served by the NodePort entry %s\n", s.Via)
		}
		if s.Broken {
			fmt.Fprintln(tw, "    ! a slot or backend of the live generation is missing; the agent rewrites it on its next sync")
		}
		if fe.PolicyDrop {
			fmt.Fprintln(tw, "    no local endpoints (internalTrafficPolicy Local): DROP (connect fails with EHOSTUNREACH)")
			continue
		}
		if len(s.Backends) == 0 {
			fmt.Fprintln(tw, "    no endpoints: REJECT (connect fails with ECONNREFUSED)")
			continue
		}
		share := 100.0 / float64(len(s.Backends))
		for _, b := range s.Backends {
			if b.NoCounter {
				// Printing 0 would claim no connects; the hooks just
				// cannot count them.
				fmt.Fprintf(tw, "    -> %s\t%.1f%%\tbackend %d\tconnects ?\tdatagrams ?\t(no stats entry: not counted; restart the agent to re-create it)\n", b.Backend, share, b.ID)
				continue
			}
			fmt.Fprintf(tw, "    -> %s\t%.1f%%\tbackend %d\tconnects %d\tdatagrams %d\n", b.Backend, share, b.ID, b.Connects, b.Datagrams)
		}
	}
	return tw.Flush()
}

func family(fe servicemap.Frontend) string {
	if fe.Key.Addr.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// attributes lists what changes how a backend is chosen, in kube-proxy's
// vocabulary.
func attributes(fe servicemap.Frontend) string {
	var a []string
	if fe.Affinity > 0 {
		a = append(a, fmt.Sprintf("affinity=ClientIP/%s", fe.Affinity))
	}
	if fe.LocalOnly {
		a = append(a, "policy=Local")
	} else {
		a = append(a, "policy=Cluster")
	}
	return strings.Join(a, " ")
}
