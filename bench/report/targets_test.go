package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func f(v float64) *float64 { return &v }

func byWhat(ts []target) map[string]target {
	m := map[string]target{}
	for _, t := range ts {
		m[t.what] = t
	}
	return m
}

func TestTargetsNotInThisRun(t *testing.T) {
	res := Results{Runs: []Run{
		{NServices: 100, Dataplane: "direct", ConnectsPerS: f(1000), UDPRRPerS: f(2000)},
		{NServices: 100, Dataplane: "socklb", ConnectsPerS: f(990), UDPRRPerS: f(1900), ProgLatencyP50ms: f(3), ProgLatencyP99ms: f(5), FullSyncS: f(0.5), AgentRSSMiB: f(40)},
	}}
	got := byWhat(targets(res))
	for _, what := range []string{
		"programming latency p99 ≤ 10 ms at N=10 000",
		"programming latency p99 ≤ 10 ms at N=100 000",
		"full sync ≤ 1 s at N=10 000 (100 000 endpoints)",
		"full sync ≤ 10 s at N=100 000 (1 000 000 endpoints)",
		"agent RSS ≤ 150 MiB at N=10 000",
		"agent RSS at N=100 000 (reported)",
	} {
		if tg, ok := got[what]; !ok || tg.status != statusAbsent {
			t.Errorf("%q = %+v, want %q: the run has only N=100", what, tg, statusAbsent)
		}
	}
	if tg := got["connects/s ≥ 0.97× direct at N=100"]; tg.status != statusMet {
		t.Errorf("connects 0.99× direct: %+v, want met", tg)
	}
	if tg := got["UDP req/s ≥ 0.97× direct at N=100"]; tg.status != statusMissed {
		t.Errorf("UDP 0.95× direct: %+v, want missed", tg)
	}
}

func TestTargetsPerN(t *testing.T) {
	res := Results{
		Runs: []Run{
			{NServices: 10000, Dataplane: "socklb", ProgLatencyP50ms: f(4), ProgLatencyP99ms: f(9), FullSyncS: f(1.5), AgentRSSMiB: f(140)},
			{NServices: 100000, Dataplane: "socklb", ProgLatencyP50ms: f(8), ProgLatencyP99ms: f(30), FullSyncS: f(9), AgentRSSMiB: f(900)},
			{NServices: 100000, Dataplane: "iptables", Note: "not attempted: did not sync within 5m0s at N=10000"},
		},
		Churn: []Churn{
			{NServices: 10000, Dataplane: "socklb", AgentCPUStartS: 10, AgentCPUS: 16, Changes: 600},
			{NServices: 100000, Dataplane: "socklb", AgentCPUStartS: 50, AgentCPUS: 56.6, Changes: 600},
		},
	}
	want := map[string]string{
		"programming latency p99 ≤ 10 ms at N=10 000":                                         statusMet,
		"programming latency p99 ≤ 10 ms at N=100 000":                                        statusMissed,
		"programming latency p50 flat in N (within 1.5×)":                                     statusMissed,
		"full sync ≤ 1 s at N=10 000 (100 000 endpoints)":                                     statusMissed,
		"full sync ≤ 10 s at N=100 000 (1 000 000 endpoints)":                                 statusMet,
		"agent RSS ≤ 150 MiB at N=10 000":                                                     statusMet,
		"agent RSS at N=100 000 (reported)":                                                   statusReported,
		"churn: agent CPU per endpoint change flat in N (CPU during the churn ÷ its changes)": statusMet,
	}
	got := byWhat(targets(res))
	for what, st := range want {
		if got[what].status != st {
			t.Errorf("%q = %+v, want %s", what, got[what], st)
		}
	}
	if m := got["churn: agent CPU per endpoint change flat in N (CPU during the churn ÷ its changes)"].measured; !strings.Contains(m, "N=10000: 10.0 ms") || !strings.Contains(m, "N=100000: 11.0 ms") {
		t.Errorf("churn CPU per change measured %q, want 10 ms at 10 000 and 11 ms at 100 000", m)
	}
}

func TestFindRunsNewestFirst(t *testing.T) {
	dir := t.TempDir()
	write := func(name, date string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		raw := `{"machine":{"date":"` + date + `"},"runs":[{"n_services":100,"dataplane":"socklb"}]}`
		if err := os.WriteFile(filepath.Join(dir, name, rawFile), []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("old", "2026-11-30T10:00:00Z")
	write("new", "2026-12-01T10:00:00Z")
	if err := os.MkdirAll(filepath.Join(dir, "hookcost"), 0o755); err != nil {
		t.Fatal(err)
	}
	runs, err := findRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
	}
	if strings.Join(names, ",") != "new,old" {
		t.Errorf("runs %v, want new,old (newest first, hookcost without a raw file left out)", names)
	}
}
