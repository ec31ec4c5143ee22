package integration

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// TestMetricsCardinality: by default /metrics has no per-Service series,
// and has the map pressure, build info, Go and process families. With
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
