// Package agentstatus is the JSON that `socklb status -o json` prints in
// an agent's pod and `kubectl socklb status` reads: one node's agent as
// its health endpoint, its metrics and its pinned maps show it. It holds
// the type and its summary only; reading the node is cmd/socklb's job.
package agentstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Status is one node's agent. A part that could not be read leaves its
// fields zero and says why in Errors, so one broken endpoint does not hide
// the rest (as `cilium status` reports each component).
type Status struct {
	Version string `json:"version"`
	// Healthz is the agent's /healthz status code (0: not reachable).
	Healthz int `json:"healthz"`
	// LastSync is the end of the last sync that programmed every frontend
	// (socklb_sync_proxy_rules_last_timestamp_seconds); zero before one.
	LastSync time.Time `json:"lastSync,omitzero"`
	// Frontends the agent wants, and those its last sync programmed.
	Frontends           int `json:"frontends"`
	FrontendsProgrammed int `json:"frontendsProgrammed"`
	Backends            int `json:"backends"`
	BackendsProgrammed  int `json:"backendsProgrammed"`
	// PinnedFrontends is what the hooks serve now, read from the pinned
	// services map: it outlives the agent.
	PinnedFrontends int `json:"pinnedFrontends"`
	// MapPressure is entries over capacity per BPF map (socklb_bpf_map_pressure).
	MapPressure     map[string]float64 `json:"mapPressure,omitempty"`
	MapUpdateErrors int                `json:"mapUpdateErrors"`
	UnusableObjects int                `json:"unusableObjects"`
	Errors          []string           `json:"errors,omitempty"`
	// Agent is whose pins and addresses were read. A status without it
	// comes from a socklb that predates it, which read its own flags'
	// defaults whatever the agent was started with.
	Agent *Agent `json:"agent,omitempty"`
}

// Where Agent's pin directory and addresses came from.
const (
	// SourceProcess: the running agent's command line and --config file,
	// parsed as the agent parses them.
	SourceProcess = "process"
	// SourceFlags: `socklb status`'s own flags.
	SourceFlags = "flags"
	// SourceDefaults: no agent was found (Errors says why) and status
	// asked kube-proxy's ports and the default pin directory.
	SourceDefaults = "defaults"
)

// Agent is the agent's configuration as far as status reads it.
type Agent struct {
	Source string `json:"source"`
	// PID and ConfigFile (its --config, if any) for SourceProcess.
	PID        int    `json:"pid,omitempty"`
	ConfigFile string `json:"configFile,omitempty"`
	BPFFSPath  string `json:"bpffsPath"`
	// HealthzAddress and MetricsAddress are where status asked: the
	// agent's bind addresses, on loopback. Empty: the agent serves none.
	HealthzAddress string `json:"healthzAddress"`
	MetricsAddress string `json:"metricsAddress"`
}

// Synced is true when the agent is healthy and has programmed every
// frontend it wants.
func (s Status) Synced() bool {
	return s.Healthz == 200 && s.Frontends == s.FrontendsProgrammed && s.Backends == s.BackendsProgrammed
}

// MaxPressure names the fullest map: alert before 1 (docs/metrics.md).
func (s Status) MaxPressure() (name string, v float64) {
	names := make([]string, 0, len(s.MapPressure))
	for n := range s.MapPressure {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if p := s.MapPressure[n]; name == "" || p > v {
			name, v = n, p
		}
	}
	return name, v
}

// Health is a one-word summary for a table.
func (s Status) Health() string {
	var problems []string
	switch {
	case s.Healthz == 0:
		problems = append(problems, "healthz unreachable")
	case s.Healthz != 200:
		problems = append(problems, fmt.Sprintf("healthz %d", s.Healthz))
	}
	if s.FrontendsProgrammed < s.Frontends {
		problems = append(problems, fmt.Sprintf("%d frontends not programmed", s.Frontends-s.FrontendsProgrammed))
	}
	if _, p := s.MaxPressure(); p >= 0.9 {
		problems = append(problems, "map nearly full")
	}
	if len(problems) == 0 && len(s.Errors) == 0 {
		return "OK"
	}
	if len(problems) == 0 {
		return "partial"
	}
	return strings.Join(problems, ", ")
}
