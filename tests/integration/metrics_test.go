package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// TestMetricsCardinality: by default /metrics has no per-Service series:
// the agent exports the same series (names and labels) with 2 Services as
// with 1 002, and has the map pressure, build info, Go and process
// families. With
// --per-service-metrics the counters are read from the maps the agent
// holds: they keep coming when the stats map's pin is gone, so no scrape
// re-opens a pin.
func TestMetricsCardinality(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		e := startEcho(t)
		m := e.scrape()
		if strings.Contains(m, "socklb_service_connections_total") {
			t.Errorf("per-Service series exported without --per-service-metrics:\n%s", testkit.GrepLines(m, "socklb_service_"))
		}
		for _, want := range []string{`socklb_bpf_map_pressure{map="services"} `, `socklb_bpf_map_pressure{map="affinity"} `, "socklb_build_info{", "go_goroutines ", "process_resident_memory_bytes "} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		var many strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&many, "%s\n---\n", serviceYAML(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", 10+i/250, 1+i%250), ready("10.244.1.11", "10.244.1.12")...))
		}
		e.writeManifest("many.yaml", many.String())
		e.waitInspect(30*time.Second, "10.96.10.1:80/TCP", "10.96.13.250:80/TCP")
		for _, addr := range []string{vip + ":80", "10.96.10.1:80", "10.96.13.250:80"} {
			if res := tcpN(t, e, e.client(), addr, 3); res.OK != 3 {
				t.Fatalf("%s: %v %v", addr, res.Replies, res.Errors)
			}
		}
		before, after := seriesOf(m), seriesOf(e.scrape())
		for s := range after {
			if !before[s] {
				t.Errorf("a series appeared with 1 000 more Services: %s", s)
			}
		}
		for s := range before {
			if !after[s] {
				t.Errorf("a series went away with 1 000 more Services: %s", s)
			}
		}
	})
	t.Run("per-service", func(t *testing.T) {
		e := newEnv(t, threePods...)
		e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
		e.startAgent("--per-service-metrics", "--pin-check-interval", "1h")
		e.waitInspect(10*time.Second, "10.244.1.13:8080")
		if res := tcpN(t, e, e.client(), vip+":80", 12); res.OK != 12 {
			t.Fatalf("connects: %v %v", res.Replies, res.Errors)
		}
		// The scrape must read the map through the agent's own handle.
		if err := os.Remove(e.mapPin("stats")); err != nil {
			t.Fatal(err)
		}
		m := e.scrape()
		if !strings.Contains(m, `socklb_service_connections_total{namespace="default",port="tcp",service="echo"} 12`) {
			t.Errorf("per-Service connects with the stats pin gone:\n%s", testkit.GrepLines(m, "socklb_service_"))
		}
		if !strings.Contains(m, "socklb_service_stats_errors_total 0") {
			t.Errorf("stats read errors:\n%s", testkit.GrepLines(m, "socklb_service_stats_errors"))
		}
	})
}

// seriesOf is the set of series (name and labels, not values) of an
// exposition.
func seriesOf(m string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(m, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}
