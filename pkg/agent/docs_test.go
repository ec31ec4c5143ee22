package agent

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestMetricsMatchDocs: every socklb_* family /metrics can export (with
// every optional collector on) is a row of docs/metrics.md, and every row
// names a family that is exported; the Go and process collectors are there.
func TestMetricsMatchDocs(t *testing.T) {
	m := NewMetrics()
	if err := m.SetBuildInfo("test", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := m.CollectServiceStats(func() ([]datapath.ServiceDump, error) {
		return []datapath.ServiceDump{{Backends: []datapath.BackendDump{{Connects: 1}}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.CollectMapPressure(func() ([]datapath.MapUsage, error) {
		return []datapath.MapUsage{{Name: "services", Entries: 1, Capacity: 4}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.CollectSocketState(func() (datapath.SocketStateEvents, error) { return datapath.SocketStateEvents{}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := m.SetFeatures(map[datapath.Feature]error{}); err != nil {
		t.Fatal(err)
	}
	// Vector families show only once they have a series.
	m.setProblems([]servicemap.Problem{{Kind: "Service", Reason: "x"}})
	m.healthzTotal.WithLabelValues("200")
	m.livezTotal.WithLabelValues("200")
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	types := map[string]string{}
	var goAndProcess []string
	for _, f := range fams {
		name := f.GetName()
		switch {
		case strings.HasPrefix(name, "socklb_"):
			exported[name] = true
			types[name] = strings.ToLower(f.GetType().String())
		case name == "go_goroutines" || name == "process_resident_memory_bytes":
			goAndProcess = append(goAndProcess, name)
		}
	}
	if len(goAndProcess) != 2 {
		t.Errorf("Go and process collectors missing: found %v", goAndProcess)
	}

	body, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| ([^|]*socklb_[^|]*) \\| ([^|]*) \\|")
	name := regexp.MustCompile("`(socklb_[a-z_]+)")
	for _, r := range row.FindAllStringSubmatch(string(body), -1) {
		for _, n := range name.FindAllStringSubmatch(r[1], -1) {
			documented[n[1]] = true
			// The type column must be the exported type: a dashboard
			// applies rate() to counters and not to gauges.
			if typ, ok := types[n[1]]; ok && strings.TrimSpace(r[2]) != typ {
				t.Errorf("docs/metrics.md says %s is a %s; /metrics exports a %s", n[1], strings.TrimSpace(r[2]), typ)
			}
		}
	}
	for n := range exported {
		if !documented[n] {
			t.Errorf("%s is exported but has no row in docs/metrics.md", n)
		}
	}
	for n := range documented {
		if !exported[n] {
			t.Errorf("docs/metrics.md has a row for %s, which /metrics does not export", n)
		}
	}
}
