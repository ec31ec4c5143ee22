// Command socklb is the socket-level load balancer for Kubernetes Services:
// one binary for the node agent and the tools that look at what it did.
package main

import (
	"fmt"
	"os"
)

const usage = `socklb: Kubernetes Services at the socket layer, in eBPF.

Usage:
  socklb agent    [flags]   watch Services and EndpointSlices, program the maps
  socklb inspect  [flags]   print the live maps as kube-proxy's chains
  socklb cleanup  [flags]   detach the hooks and remove every pin
  socklb mount-cgroup DIR   mount the host's cgroup2 at DIR (the DaemonSet's init container)
  socklb version

Run "socklb <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"agent":        runAgent,
		"inspect":      runInspect,
		"cleanup":      runCleanup,
		"mount-cgroup": runMountCgroup,
		"version":      runVersion,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		if os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
			fmt.Print(usage)
			return
		}
		fmt.Fprintf(os.Stderr, "socklb: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err := cmd(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "socklb %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
