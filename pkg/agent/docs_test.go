package agent

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestMetricsMatchDocs: every socklb_* family /metrics can export (with
// every optional collector on, as New registers them) is a row of docs/metrics.md, and every row
// names a family that is exported; the Go and process collectors are there.
func TestMetricsMatchDocs(t *testing.T) {
	a, err := New(Config{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Datapath: nopApplier{},
		Scrape: fakeReader{}, PerServiceMetrics: true, Version: "test", Revision: "abc",
		Packets: &fakePackets{},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := a.metrics
	// Vector families show only once they have a series.
	m.setProblems([]model.Problem{{Kind: model.KindService, Reason: "x"}})
	m.setRefused(map[ktypes.NamespacedName]servicemap.Demand{{Namespace: "t", Name: "x"}: {Frontends: 1}})
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

// fakeReader is a datapath with one of everything to read.
type fakeReader struct{}

func (fakeReader) MapUsage() ([]datapath.MapUsage, error) {
	return []datapath.MapUsage{{Name: "services", Entries: 1, Capacity: 4}}, nil
}

func (fakeReader) ServiceStats() ([]datapath.ServiceDump, error) {
	return []datapath.ServiceDump{{Backends: []datapath.BackendDump{{Connects: 1}}}}, nil
}

func (fakeReader) SocketStateEvents() (datapath.SocketStateEvents, error) {
	return datapath.SocketStateEvents{}, nil
}

func (fakeReader) Features() map[datapath.Feature]error { return map[datapath.Feature]error{} }
