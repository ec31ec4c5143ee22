package agent

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestNewWiresHealthIntoMetrics: an agent from New counts its /healthz and
// /livez answers in its own /metrics from the start, before Run: nothing
// outside the agent (cmd, Run) has to connect the two.
func TestNewWiresHealthIntoMetrics(t *testing.T) {
	a, err := New(Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Datapath: nopApplier{}, HealthTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/livez", "/livez"} {
		a.HealthHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	rec := httptest.NewRecorder()
	a.MetricsHandler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, w := range []string{`socklb_proxy_healthz_total{code="200"} 1`, `socklb_proxy_livez_total{code="200"} 2`} {
		if !strings.Contains(rec.Body.String(), w) {
			t.Errorf("/metrics lacks %s:\n%s", w, testkit.GrepLines(rec.Body.String(), "socklb_proxy_"))
		}
	}
}

// TestAgentAddsNodeFacts: the agent, not its caller, adds what the source
// does not know to every snapshot: the node's interface addresses and the
// --nodeport-addresses filter, so a NodePort is served on the local
// addresses inside the filter only.
func TestAgentAddsNodeFacts(t *testing.T) {
	h := startAgent(t, func(c *Config) {
		c.LocalAddresses = func() ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("198.51.100.7")}, nil
		}
		c.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	np := service("np", "10.96.0.30")
	np.Spec.Type = corev1.ServiceTypeNodePort
	np.Spec.Ports[0].NodePort = 30080
	h.src.set(func(in *model.Input) { in.Services = []*corev1.Service{np} })
	st := h.waitApply()
	if !h.dp.servesNodePort(st, "192.0.2.10:30080") {
		t.Errorf("no NodePort at 192.0.2.10:30080; frontends: %v, NodePort addresses %v", keysOf(st), h.dp.nodePorts)
	}
	if h.dp.servesNodePort(st, "198.51.100.7:30080") {
		t.Error("NodePort served on 198.51.100.7, outside --nodeport-addresses")
	}
}

func keysOf(st servicemap.State) []string {
	var out []string
	for k := range st {
		out = append(out, k.String())
	}
	return out
}
