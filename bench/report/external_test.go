package main

import (
	"strings"
	"testing"
)

// TestExternalSection: a run of the external scenario gets a row per (N,
// case), its ratios to direct and to kube-proxy, the source each backend
// saw, a null row's note, and socklb's device programs per packet (a
// program that saw no packet left out).
func TestExternalSection(t *testing.T) {
	res := Results{
		Scenario: "external",
		Machine:  map[string]any{"date": "2026-12-02T00:00:00Z", "git_commit": "0123456789abcdef"},
		External: []ExternalRun{
			{NServices: 100, Case: "local", Dataplane: "direct", Backend: "n1-p1", Addr: "10.244.1.11:8080", BackendSaw: "10.250.0.100", ConnectsPerS: f(4000)},
			{NServices: 100, Case: "local", Dataplane: "socklb", Backend: "n1-p1", Addr: "10.250.0.11:30080", BackendSaw: "10.250.0.100", ConnectsPerS: f(3000),
				ConnectsPerSRounds: []float64{2900.4, 3000, 3100.6}},
			{NServices: 100, Case: "remote", Dataplane: "direct", Backend: "n2-p1", Addr: "10.244.2.11:8080", BackendSaw: "10.250.0.100", ConnectsPerS: f(4000)},
			{NServices: 100, Case: "remote", Dataplane: "socklb", Backend: "n2-p1", Addr: "10.250.0.11:30081", BackendSaw: "10.250.0.11", ConnectsPerS: f(2000),
				ConnectsMeasured: 4000, SynRetrans: i64(6), BackendPAWSTimewait: i64(0)},
			{NServices: 100, Case: "local", Dataplane: "iptables", Backend: "n1-p1", Note: "did not sync within 5m0s"},
			{NServices: 100, Case: "remote", Dataplane: "iptables", Backend: "n2-p1", Note: "did not sync within 5m0s"},
		},
		HookCost: []HookCost{{NServices: 100, Hooks: map[string]HookCall{
			"local n1/dev-eth0-ingress": {RunCount: 10, RunTimeNS: 5000, NSPerCall: f(500)},
			"local n2/dev-eth0-ingress": {},
		}}},
	}
	if got := runSizes(res); got != "100" {
		t.Errorf("runSizes = %q, want 100", got)
	}
	sec := externalSection(namedRun{name: "ext", dir: "/r/ext", res: res}, "/r/ext/BENCHMARKS.md")
	for _, want := range []string{
		"| 100 | local | 4000 | 3000 | 0.75× |",
		"| 100 | remote | 4000 | 2000 | 0.50× |",
		"| 100 | remote | n2-p1 | socklb | 10.250.0.11:30081 |",
		"| 10.250.0.11 |",
		"did not sync within 5m0s",
		"| 100 | local | n1/dev-eth0-ingress | 10 | 0.005 | 500.0 |",
		"| 100 | remote | 1.5 |",
		"| 100 | local | 2900, 3000, 3101 |",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "n2/dev-eth0-ingress") {
		t.Errorf("a program that saw no packet has a row:\n%s", sec)
	}
	if strings.Contains(sec, "iptables ÷") {
		t.Errorf("a ratio column for a dataplane without figures:\n%s", sec)
	}
}

func i64(v int64) *int64 { return &v }
