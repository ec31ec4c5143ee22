package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// lockedBuffer is a log destination the agent's goroutines and the test
// share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines with message msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestProblemsOnOnePath: a problem a source reports (a failed watch) and
// one a build finds (a Service with a bad cluster IP) come out as the same
// log line and are counted in one metric by kind; a build problem that
// lasts over several syncs is logged and counted once.
func TestProblemsOnOnePath(t *testing.T) {
	h := startAgent(t)
	h.a.Report(model.Problem{Kind: model.KindWatch, Object: types.NamespacedName{Name: "services"}, Reason: "forbidden"})
	h.src.set(func(in *model.Input) { in.Services = []*corev1.Service{service("bad", "not-an-ip")} })
	h.waitApply()
	h.settle()
	h.src.set(func(in *model.Input) { in.Services = append(in.Services, service("web", "10.96.0.10")) })
	h.waitApply()
	h.settle()

	want := `
# HELP socklb_problems_total Problems the agent logged, by kind of object: each new one a sync finds (Service, EndpointSlice, Node) and each one a source reports (File, Watch, or an object a manifests directory defines twice).
# TYPE socklb_problems_total counter
socklb_problems_total{kind="EndpointSlice"} 0
socklb_problems_total{kind="File"} 0
socklb_problems_total{kind="Node"} 0
socklb_problems_total{kind="Service"} 1
socklb_problems_total{kind="Watch"} 1
`
	if err := testutil.GatherAndCompare(h.a.metrics.Registry, strings.NewReader(want), "socklb_problems_total"); err != nil {
		t.Error(err)
	}
	lines := h.logs.lines(t, "skipping unusable input")
	if len(lines) != 2 {
		t.Fatalf("%d problem lines, want 2 (the watch, the Service once): %v", len(lines), lines)
	}
	if l := lines[0]; l["kind"] != "Watch" || l["resource"] != "services" || l["reason"] != "forbidden" {
		t.Errorf("the source's problem logged as %v", l)
	}
	if l := lines[1]; l["kind"] != "Service" || !strings.Contains(l["reason"].(string), "not-an-ip") {
		t.Errorf("the build's problem logged as %v", l)
	}
}
