package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/socklb/socklb/pkg/agentstatus"
	"github.com/socklb/socklb/pkg/datapath"
)

// newStatusCommand reads the agent of this node the way an operator
// would, by hand: its /healthz, its /metrics and its pins. `kubectl socklb
// status` runs it in every agent pod.
func newStatusCommand() *cobra.Command {
	var bpffs, healthzAddr, metricsAddr, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "print this node's agent: version, health, sync, frontends, map pressure",
		Long: "socklb status asks the agent running on this node for its /healthz and /metrics (on loopback) and reads the pinned maps. " +
			"Unless --bpffs-path, --healthz-address or --metrics-address is given, it finds them as the agent does: from the `socklb agent` process of its container (else the node's only one), its command line and its --config file. " +
			"Each part it cannot read is reported and the rest still printed; it exits 1 when the agent is not healthy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: unknown output format; use text or json", output)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			a := agentstatus.Agent{Source: agentstatus.SourceFlags, BPFFSPath: bpffs, HealthzAddress: healthzAddr, MetricsAddress: metricsAddr}
			var findErr error
			if f := cmd.Flags(); !f.Changed("bpffs-path") && !f.Changed("healthz-address") && !f.Changed("metrics-address") {
				a, findErr = agentFromProc("/proc", a)
			}
			s := readStatus(ctx, a)
			if findErr != nil {
				s.Errors = append([]string{findErr.Error()}, s.Errors...)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(s); err != nil {
					return err
				}
			} else {
				printStatus(cmd.OutOrStdout(), s)
			}
			if s.Health() != "OK" {
				return fmt.Errorf("agent not healthy: %s", s.Health())
			}
			return nil
		},
	}
	// With none of the three flags, the running agent's own configuration
	// says where to look (agentFromProc); any one of them means all three
	// are this command's, as before.
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.StringVar(&bpffs, "bpffs-path", defaultBPFFS, "directory holding socklb's pins (with none of the three flags set: the running agent's)")
		fs.StringVar(&healthzAddr, "healthz-address", "127.0.0.1:10256", "where the agent serves /healthz: its --healthz-bind-address, on loopback (with none of the three flags set: the running agent's)")
		fs.StringVar(&metricsAddr, "metrics-address", "127.0.0.1:10249", "where the agent serves /metrics: its --metrics-bind-address, on loopback (with none of the three flags set: the running agent's)")
		fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	})
	return cmd
}

// agentFromProc reads the pins and addresses of the agent running on this
// node (findAgent) into a; without one, a keeps the flags' defaults and
// says so, and the error says why.
func agentFromProc(proc string, a agentstatus.Agent) (agentstatus.Agent, error) {
	ag, err := findAgent(proc)
	if err != nil {
		a.Source = agentstatus.SourceDefaults
		return a, fmt.Errorf("the agent's configuration: %w; asked the defaults (%s, %s, %s)", err, a.BPFFSPath, a.HealthzAddress, a.MetricsAddress)
	}
	return agentstatus.Agent{
		Source: agentstatus.SourceProcess, PID: ag.pid, ConfigFile: ag.configFile,
		BPFFSPath:      ag.cfg.BPFFSPath,
		HealthzAddress: loopback(ag.cfg.HealthzBindAddress),
		MetricsAddress: loopback(ag.cfg.MetricsBindAddress),
	}, nil
}

// loopback turns a bind address into the address to ask it on from the
// node itself (the agent shares the node's network).
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

// readStatus never fails as a whole: each source that cannot be read adds
// an error naming it and the flag that points at it.
func readStatus(ctx context.Context, a agentstatus.Agent) agentstatus.Status {
	s := agentstatus.Status{Version: version, Agent: &a}
	client := &http.Client{}
	switch code, err := httpGet(ctx, client, a.HealthzAddress, "/healthz", nil); {
	case a.HealthzAddress == "":
		s.Errors = append(s.Errors, "/healthz: the agent serves none (its --healthz-bind-address is empty)")
	case err != nil:
		s.Errors = append(s.Errors, fmt.Sprintf("/healthz: %v (is the agent running? is --healthz-address its --healthz-bind-address?)", err))
	default:
		s.Healthz = code
	}
	switch _, err := httpGet(ctx, client, a.MetricsAddress, "/metrics", func(body io.Reader) error { return readMetrics(body, &s) }); {
	case a.MetricsAddress == "":
		s.Errors = append(s.Errors, "/metrics: the agent serves none (its --metrics-bind-address is empty)")
	case err != nil:
		s.Errors = append(s.Errors, fmt.Sprintf("/metrics: %v (is --metrics-address the agent's --metrics-bind-address?)", err))
	}
	if dump, err := datapath.Dump(a.BPFFSPath); err != nil {
		s.Errors = append(s.Errors, fmt.Sprintf("pinned maps: %v (is --bpffs-path the agent's?)", err))
	} else {
		s.PinnedFrontends = len(dump)
	}
	return s
}

// httpGet asks http://addr+path; an empty addr (a listener the agent
// does not open) is not asked.
func httpGet(ctx context.Context, c *http.Client, addr, path string, read func(io.Reader) error) (int, error) {
	if addr == "" {
		return 0, nil
	}
	url := "http://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if read != nil {
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return resp.StatusCode, read(resp.Body)
	}
	return resp.StatusCode, nil
}

// readMetrics picks the families docs/metrics.md documents for this.
func readMetrics(body io.Reader, s *agentstatus.Status) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	if err != nil {
		return err
	}
	value := func(name string) float64 {
		var sum float64
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return sum
	}
	s.Frontends = int(value("socklb_frontends"))
	s.FrontendsProgrammed = int(value("socklb_frontends_programmed"))
	s.Backends = int(value("socklb_backends"))
	s.BackendsProgrammed = int(value("socklb_backends_programmed"))
	s.MapUpdateErrors = int(value("socklb_map_update_errors_total"))
	s.UnusableObjects = int(value("socklb_unusable_objects"))
	if ts := value("socklb_sync_proxy_rules_last_timestamp_seconds"); ts > 0 {
		s.LastSync = time.Unix(0, int64(ts*1e9)).UTC()
	}
	if f := fams["socklb_bpf_map_pressure"]; f != nil {
		s.MapPressure = map[string]float64{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "map" {
					s.MapPressure[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return nil
}

func printStatus(w io.Writer, s agentstatus.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Version:\t%s\n", s.Version)
	if a := s.Agent; a != nil {
		from := a.Source
		if a.PID != 0 {
			from = fmt.Sprintf("process %d", a.PID)
		}
		if a.ConfigFile != "" {
			from += ", --config " + a.ConfigFile
		}
		fmt.Fprintf(tw, "Agent:\t%s (pins %s, healthz %s, metrics %s)\n", from, a.BPFFSPath, orNone(a.HealthzAddress), orNone(a.MetricsAddress))
	}
	fmt.Fprintf(tw, "Health:\t%s\n", s.Health())
	last := "never"
	if !s.LastSync.IsZero() {
		last = s.LastSync.Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "Last full sync:\t%s\n", last)
	fmt.Fprintf(tw, "Frontends:\t%d/%d programmed, %d pinned\n", s.FrontendsProgrammed, s.Frontends, s.PinnedFrontends)
	fmt.Fprintf(tw, "Backends:\t%d/%d programmed\n", s.BackendsProgrammed, s.Backends)
	if name, p := s.MaxPressure(); name != "" {
		fmt.Fprintf(tw, "Map pressure:\t%.0f%% (%s, the fullest)\n", p*100, name)
	}
	fmt.Fprintf(tw, "Map update errors:\t%d\n", s.MapUpdateErrors)
	fmt.Fprintf(tw, "Unusable objects:\t%d\n", s.UnusableObjects)
	for _, e := range s.Errors {
		fmt.Fprintf(tw, "Error:\t%s\n", e)
	}
	_ = tw.Flush()
}

func orNone(addr string) string {
	if addr == "" {
		return "none"
	}
	return addr
}
