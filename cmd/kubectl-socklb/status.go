package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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

// statusCommand is what runs in each agent pod. It passes no pin
// directory or address: socklb status reads them from the agent process
// in its container (its command line and --config file), so an install
// configured through a SocklbConfiguration file is read as the agent
// reads it, not from the DaemonSet's args.
var statusCommand = []string{"/socklb", "status", "-o", "json"}

// agentStatus asks p's agent for its status.
func (c *cluster) agentStatus(ctx context.Context, p *corev1.Pod) (*agentstatus.Status, error) {
	out, err := c.execOutput(ctx, p, statusCommand)
	return parseStatus(p, out, err)
}

// parseStatus reads what statusCommand printed. socklb status exits 1 for
// an unhealthy agent and still prints it: its JSON wins over the exit
// code. A status that does not say whose configuration it read comes from
// an image older than that: it read its own defaults, whatever the agent
// runs with, so it is refused rather than shown.
func parseStatus(p *corev1.Pod, out []byte, execErr error) (*agentstatus.Status, error) {
	var s agentstatus.Status
	if jerr := json.Unmarshal(out, &s); jerr != nil {
		if execErr != nil {
			return nil, execErr
		}
		return nil, fmt.Errorf("%v in pod %s/%s printed no status (%v): is the image older than `socklb status`?", statusCommand, p.Namespace, p.Name, jerr)
	}
	if s.Agent == nil {
		return nil, fmt.Errorf("pod %s/%s on node %s runs socklb %s, too old to report the agent's configuration (its `socklb status` reads its own flags' defaults, whatever the agent was started with): "+
			"upgrade the DaemonSet's image to a socklb as new as this plugin, or ask the pod by hand with the agent's values: kubectl -n %s exec %s -c %s -- /socklb status --bpffs-path DIR --healthz-address ADDR --metrics-address ADDR",
			p.Namespace, p.Name, p.Spec.NodeName, s.Version, p.Namespace, p.Name, agentContainer)
	}
	return &s, nil
}

// agentPins is the pin directory of p's agent, from its own status.
func (c *cluster) agentPins(ctx context.Context, p *corev1.Pod) (string, error) {
	s, err := c.agentStatus(ctx, p)
	if err != nil {
		return "", err
	}
	if s.Agent.Source != agentstatus.SourceProcess {
		return "", fmt.Errorf("socklb status in pod %s/%s on node %s could not read the agent's pin directory: %s", p.Namespace, p.Name, p.Spec.NodeName, strings.Join(s.Errors, "; "))
	}
	return s.Agent.BPFFSPath, nil
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
