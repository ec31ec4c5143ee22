package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/cobra"

	"github.com/socklb/socklb/pkg/agentstatus"
)

// nodeStatus is one agent pod: what `socklb status` printed in it, or why
// it could not run there.
type nodeStatus struct {
	Node   string              `json:"node"`
	Pod    string              `json:"pod"`
	Phase  corev1.PodPhase     `json:"phase"`
	Status *agentstatus.Status `json:"status,omitempty"`
	Error  string              `json:"error,omitempty"`
}

func (n nodeStatus) ok() bool { return n.Error == "" && n.Status != nil && n.Status.Health() == "OK" }

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "every node's agent: version, health, sync, frontends, map pressure",
		Long: `kubectl socklb status runs "socklb status -o json" in every agent pod and prints one
line per node; a pod that is not Running is shown with its phase and reason.
It exits 1 unless every agent is healthy and fully programmed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: unknown output format; use table or json", output)
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			pods, err := c.agentPods(ctx)
			if err != nil {
				return err
			}
			statuses := c.statuses(ctx, pods)
			if output == "json" {
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(statuses); err != nil {
					return err
				}
			} else {
				c.printDaemonSet(ctx, o.streams.Out, pods)
				printStatuses(o.streams.Out, statuses)
			}
			bad := 0
			for _, s := range statuses {
				if !s.ok() {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d agents not healthy", bad, len(statuses))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// statuses asks every Running agent pod at once, a few at a time.
func (c *cluster) statuses(ctx context.Context, pods []corev1.Pod) []nodeStatus {
	out := make([]nodeStatus, len(pods))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range pods {
		p := &pods[i]
		out[i] = nodeStatus{Node: p.Spec.NodeName, Pod: p.Name, Phase: p.Status.Phase}
		if err := runnable(p); err != nil {
			out[i].Error = err.Error()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := c.agentStatus(ctx, p)
			out[i].Status = s
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// agentStatus runs `socklb status -o json` against the ports and pins this
// pod's agent was started with. socklb status exits 1 for an unhealthy
// agent and still prints it: its JSON wins over the exit code.
func (c *cluster) agentStatus(ctx context.Context, p *corev1.Pod) (*agentstatus.Status, error) {
	command := []string{"/socklb", "status", "-o", "json",
		"--bpffs-path=" + agentArg(p, "bpffs-path", "/sys/fs/bpf/socklb"),
		"--healthz-address=" + loopback(agentArg(p, "healthz-bind-address", "0.0.0.0:10256")),
		"--metrics-address=" + loopback(agentArg(p, "metrics-bind-address", "127.0.0.1:10249")),
	}
	out, err := c.execOutput(ctx, p, command)
	var s agentstatus.Status
	if jerr := json.Unmarshal(out, &s); jerr != nil {
		if err == nil {
			err = fmt.Errorf("%v in pod %s/%s printed no status (%v): is the image older than `socklb status`?", command, p.Namespace, p.Name, jerr)
		}
		return nil, err
	}
	return &s, nil
}

// loopback turns a bind address into the address to ask it on from the
// node itself (the pod shares the node's network).
func loopback(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return bind
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

func (c *cluster) printDaemonSet(ctx context.Context, w io.Writer, pods []corev1.Pod) {
	for _, ref := range pods[0].OwnerReferences {
		if ref.Kind != "DaemonSet" {
			continue
		}
		ds, err := c.client.AppsV1().DaemonSets(c.namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(w, "DaemonSet %s/%s: %v\n", c.namespace, ref.Name, err)
			return
		}
		st := ds.Status
		fmt.Fprintf(w, "DaemonSet %s/%s: desired %d, ready %d, up-to-date %d, available %d\n\n",
			ds.Namespace, ds.Name, st.DesiredNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable)
		return
	}
}

func printStatuses(w io.Writer, statuses []nodeStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOD\tVERSION\tHEALTH\tLAST SYNC\tFRONTENDS\tBACKENDS\tMAP PRESSURE")
	var errs []string
	for _, n := range statuses {
		if n.Status == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t%s\t-\t-\t-\t-\n", n.Node, n.Pod, n.Phase)
		} else {
			s := n.Status
			last := "never"
			if !s.LastSync.IsZero() {
				last = time.Since(s.LastSync).Round(time.Second).String() + " ago"
			}
			pressure := "-"
			if name, p := s.MaxPressure(); name != "" {
				pressure = fmt.Sprintf("%.0f%% (%s)", p*100, name)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d (%d pinned)\t%d/%d\t%s\n", n.Node, n.Pod, s.Version, s.Health(), last,
				s.FrontendsProgrammed, s.Frontends, s.PinnedFrontends, s.BackendsProgrammed, s.Backends, pressure)
			for _, e := range s.Errors {
				errs = append(errs, n.Node+": "+e)
			}
		}
		if n.Error != "" {
			errs = append(errs, n.Node+": "+n.Error)
		}
	}
	_ = tw.Flush()
	if len(errs) > 0 {
		fmt.Fprintln(w, "\nErrors:")
		for _, e := range errs {
			fmt.Fprintln(w, "  "+e)
		}
	}
}
