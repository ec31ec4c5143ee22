package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// fakeSource hands the agent whatever the test sets.
type fakeSource struct {
	mu      sync.Mutex
	in      model.Input
	changed func()
	ready   chan struct{}
}

func newFakeSource() *fakeSource {
	return &fakeSource{ready: make(chan struct{}), in: model.Input{NodeName: "node-a"}}
}

func (s *fakeSource) Run(ctx context.Context, changed func()) error {
	s.mu.Lock()
	s.changed = changed
	s.mu.Unlock()
	close(s.ready)
	<-ctx.Done()
	return nil
}

func (s *fakeSource) Snapshot() model.Input {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}

// set replaces the objects and tells the agent, as an informer event would.
func (s *fakeSource) set(mod func(in *model.Input)) {
	s.mu.Lock()
	in := s.in
	in.Services = append([]*corev1.Service(nil), in.Services...)
	in.Slices = append([]*discoveryv1.EndpointSlice(nil), in.Slices...)
	in.Nodes = append([]*corev1.Node(nil), in.Nodes...)
	mod(&in)
	s.in = in
	changed := s.changed
	s.mu.Unlock()
	changed()
}

// fakeApplier records Applies; fail makes frontends of a Service fail.
type fakeApplier struct {
	mu      sync.Mutex
	fail    map[string]bool // Service name
	applied chan servicemap.State
	delay   time.Duration // how long each Apply takes
	// nodePorts is this node's NodePort addresses, as last handed over.
	nodePorts []netip.Addr
}

func (a *fakeApplier) SetNodeAddresses(local, _ []netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nodePorts = slices.Clone(local)
	return nil
}

// servesNodePort says whether st and the NodePort addresses handed over
// serve addrPort as a NodePort: one frontend per port at the unspecified
// address, reached at every address node_addrs lists as this node's.
func (a *fakeApplier) servesNodePort(st servicemap.State, addrPort string) bool {
	want := netip.MustParseAddrPort(addrPort)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.nodePorts, want.Addr()) {
		return false
	}
	for k, fe := range st {
		if fe.Kind == servicemap.KindNodePort && k.Addr.IsUnspecified() && k.Addr.Is4() == want.Addr().Is4() && k.Port == want.Port() && k.Scope == servicemap.ScopeAny {
			return true
		}
	}
	return false
}

func (a *fakeApplier) Apply(st servicemap.State) datapath.ApplyResult {
	a.mu.Lock()
	time.Sleep(a.delay)
	res := datapath.ApplyResult{Upserted: len(st), Failed: map[servicemap.FrontendKey]error{}}
	for k, fe := range st {
		if a.fail[fe.Service.Name] {
			// As the datapath wraps it: the map is found with errors.As.
			res.Failed[k] = fmt.Errorf("programming %s: %w", k, &datapath.MapError{Map: "services", Err: errors.New("services map is full")})
		}
	}
	a.mu.Unlock()
	a.applied <- st
	return res
}

func (a *fakeApplier) setFail(name string, fail bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[name] = fail
}

type harness struct {
	t      *testing.T
	logs   *lockedBuffer // the agent's log, as JSON lines
	src    *fakeSource
	dp     *fakeApplier
	a      *Agent
	synced chan bool
}

func startAgent(t *testing.T, opts ...func(*Config)) *harness {
	h := &harness{t: t, src: newFakeSource(), dp: &fakeApplier{fail: map[string]bool{}, applied: make(chan servicemap.State, 100)}, logs: &lockedBuffer{}}
	cfg := Config{
		Datapath: h.dp, Log: slog.New(slog.NewJSONHandler(h.logs, nil)), HealthTimeout: time.Minute,
		RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond, LocalAddresses: noAddresses,
	}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Trigger times up to a minute old count as after the start.
	a.started = time.Now().Add(-time.Minute)
	h.a = a
	h.synced = make(chan bool, 100)
	h.a.afterSync = func(ok bool) { h.synced <- ok }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx, h.src) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-h.src.ready
	return h
}

// waitApply waits for the next Apply.
func (h *harness) waitApply() servicemap.State {
	h.t.Helper()
	select {
	case st := <-h.dp.applied:
		return st
	case <-time.After(5 * time.Second):
		h.t.Fatal("no Apply within 5s")
		return nil
	}
}

// settle waits for the end of the sync the last Apply belongs to: the
// metrics are written after Apply returns.
func (h *harness) settle() bool {
	h.t.Helper()
	select {
	case ok := <-h.synced:
		return ok
	case <-time.After(5 * time.Second):
		h.t.Fatal("no sync finished within 5s")
		return false
	}
}

func countOf(t *testing.T, m *Metrics, name string) uint64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

func sumOf(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	return 0
}

func service(name, ip string) *corev1.Service {
	s := testkit.Service(name, ip, testkit.ServicePort("http", corev1.ProtocolTCP, 80))
	s.UID, s.ResourceVersion = types.UID("uid-"+name), "1"
	return s
}

func endpointSlice(svc, rv string, trigger time.Time, ips ...string) *discoveryv1.EndpointSlice {
	s := testkit.EndpointSlice(svc+"-abcde", svc, discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{testkit.EndpointPort("http", corev1.ProtocolTCP, 8080)})
	s.UID, s.ResourceVersion = types.UID("uid-slice-"+svc), rv
	if !trigger.IsZero() {
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, testkit.Endpoint(ip, testkit.Ptr(true), nil, nil))
	}
	return s
}

func replaceSlice(in *model.Input, s *discoveryv1.EndpointSlice) {
	for i, old := range in.Slices {
		if old.Name == s.Name {
			in.Slices[i] = s
			return
		}
	}
	in.Slices = append(in.Slices, s)
}

func TestAgentChangesAndProgrammingLatency(t *testing.T) {
	h := startAgent(t)
	m := h.a.metrics
	before := h.a.started.Add(-time.Second) // before the agent started: not measured

	// The initial list: two Services, one slice stamped before the agent
	// started (kube-proxy ignores such trigger times).
	h.src.set(func(in *model.Input) {
		in.Services = append(in.Services, service("web", "10.96.0.10"), service("db", "10.96.0.11"))
		in.Slices = append(in.Slices, endpointSlice("web", "1", before, "10.244.1.11"))
	})
	if st := h.waitApply(); len(st) != 2 {
		t.Fatalf("first Apply has %d frontends, want 2", len(st))
	}
	h.settle()
	if got := testutil.ToFloat64(m.serviceChanges); got != 2 {
		t.Errorf("service changes total %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.endpointChanges); got != 1 {
		t.Errorf("endpoint changes total %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.serviceChangesPend) + testutil.ToFloat64(m.endpointChangesPen); got != 0 {
		t.Errorf("pending changes %v after the sync, want 0", got)
	}
	if n := countOf(t, m, "socklb_network_programming_duration_seconds"); n != 0 {
		t.Errorf("%d network programming samples from a trigger time before the start, want 0", n)
	}
	if got := testutil.ToFloat64(m.frontends); got != 2 {
		t.Errorf("socklb_frontends %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.backends); got != 1 {
		t.Errorf("socklb_backends %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.programmedFE); got != 2 {
		t.Errorf("socklb_frontends_programmed %v, want 2", got)
	}

	// The EndpointSlice controller scales web: the slice changes, stamped
	// 1.5 s before the agent sees it. The latency is from that stamp.
	trigger := time.Now().Add(-1500 * time.Millisecond)
	h.src.set(func(in *model.Input) {
		replaceSlice(in, endpointSlice("web", "2", trigger, "10.244.1.11", "10.244.1.12"))
	})
	h.waitApply()
	h.settle()
	if n := countOf(t, m, "socklb_network_programming_duration_seconds"); n != 1 {
		t.Fatalf("%d network programming samples, want 1", n)
	}
	if s := sumOf(t, m, "socklb_network_programming_duration_seconds"); s < 1.5 || s > 5 {
		t.Errorf("network programming latency %.3fs, want about 1.5s", s)
	}
	if got := testutil.ToFloat64(m.endpointChanges); got != 2 {
		t.Errorf("endpoint changes total %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.backends); got != 2 {
		t.Errorf("socklb_backends %v, want 2", got)
	}

	// A Service update alone has no trigger time; a deleted slice's
	// annotation is from its last update: neither is measured.
	h.src.set(func(in *model.Input) {
		s := *in.Services[1]
		s.ResourceVersion = "2"
		in.Services[1] = &s
		in.Slices = nil
	})
	h.waitApply()
	h.settle()
	if n := countOf(t, m, "socklb_network_programming_duration_seconds"); n != 1 {
		t.Errorf("%d network programming samples after a Service update and a slice deletion, want still 1", n)
	}
	if got := testutil.ToFloat64(m.serviceChanges); got != 3 {
		t.Errorf("service changes total %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.endpointChanges); got != 3 {
		t.Errorf("endpoint changes total %v, want 3 (the deletion counts)", got)
	}
	if testutil.ToFloat64(m.lastSync) == 0 || testutil.ToFloat64(m.lastQueued) == 0 {
		t.Error("last sync / last queued timestamps not set")
	}
}

// Pending changes are what arrived since the last sync read the objects;
// they show while a sync is stuck.
func TestAgentPendingWhileSyncStuck(t *testing.T) {
	h := startAgent(t)
	m := h.a.metrics
	h.dp.applied = make(chan servicemap.State) // unbuffered: Apply blocks until read
	h.src.set(func(in *model.Input) { in.Services = append(in.Services, service("web", "10.96.0.10")) })
	// The agent is now inside Apply, which blocks. Two more changes arrive.
	time.Sleep(20 * time.Millisecond)
	h.src.set(func(in *model.Input) {
		in.Services = append(in.Services, service("db", "10.96.0.11"))
		in.Slices = append(in.Slices, endpointSlice("db", "1", time.Time{}, "10.244.1.11"))
	})
	if got := testutil.ToFloat64(m.serviceChangesPend); got != 1 {
		t.Errorf("service changes pending %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.endpointChangesPen); got != 1 {
		t.Errorf("endpoint changes pending %v, want 1", got)
	}
	h.waitApply() // the stuck sync
	h.settle()
	h.waitApply() // the next one reads both changes
	h.settle()
	if got := testutil.ToFloat64(m.serviceChangesPend) + testutil.ToFloat64(m.endpointChangesPen); got != 0 {
		t.Errorf("pending %v after the sync, want 0", got)
	}
	if got := testutil.ToFloat64(m.serviceChanges); got != 2 {
		t.Errorf("service changes total %v, want 2", got)
	}
}

// A frontend that cannot be programmed is retried without a new API event;
// errors are counted; the sync timestamp and health move only on success;
// the programming latency is measured when it finally lands.
func TestAgentRetriesFailedFrontends(t *testing.T) {
	h := startAgent(t)
	m := h.a.metrics
	h.dp.setFail("web", true)
	trigger := time.Now()
	h.src.set(func(in *model.Input) {
		in.Services = append(in.Services, service("web", "10.96.0.10"))
		in.Slices = append(in.Slices, endpointSlice("web", "1", trigger, "10.244.1.11"))
	})
	h.waitApply()
	if h.settle() {
		t.Fatal("sync succeeded")
	}
	h.waitApply() // a retry, with no new event
	h.settle()
	if got := testutil.ToFloat64(m.failures); got < 2 {
		t.Errorf("socklb_map_update_errors_total %v, want >= 2", got)
	}
	if got := testutil.ToFloat64(m.lastSync); got != 0 {
		t.Errorf("last sync timestamp %v set by failed syncs", got)
	}
	if got := testutil.ToFloat64(m.programmedFE); got != 0 {
		t.Errorf("socklb_frontends_programmed %v, want 0", got)
	}
	if n := countOf(t, m, "socklb_network_programming_duration_seconds"); n != 0 {
		t.Errorf("%d programming samples while failing", n)
	}
	h.dp.setFail("web", false)
	for ok := false; !ok; { // retries in flight may still fail
		h.waitApply()
		ok = h.settle()
	}
	if testutil.ToFloat64(m.lastSync) == 0 {
		t.Error("last sync timestamp not set after the successful retry")
	}
	if n := countOf(t, m, "socklb_network_programming_duration_seconds"); n != 1 {
		t.Errorf("%d programming samples after the retry succeeded, want 1", n)
	}
	if got := testutil.ToFloat64(m.programmedFE); got != 1 {
		t.Errorf("socklb_frontends_programmed %v, want 1", got)
	}
	select {
	case <-h.dp.applied:
		t.Error("agent kept retrying after a successful sync")
	case <-time.After(100 * time.Millisecond):
	}
}

// The agent feeds the Node to health: a tainted node fails /healthz.
func TestAgentNodeHealth(t *testing.T) {
	h := startAgent(t)
	h.src.set(func(in *model.Input) {
		in.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}}}}
	})
	h.waitApply()
	h.settle()
	rec := httptest.NewRecorder()
	h.a.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"nodeEligible":false`) {
		t.Errorf("/healthz on a node being scaled down: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.a.MetricsHandler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `socklb_proxy_healthz_total{code="503"} 1`) {
		t.Errorf("/metrics lacks the healthz counter:\n%s", rec.Body)
	}
}

// Every socklb_* metric documented in docs/metrics.md is exported, and the
// names pass promlint.
func TestMetricsLint(t *testing.T) {
	m := testMetrics()
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// kube-proxy's names, kept on purpose for dashboards: a gauge named
		// *_total (no_local_endpoints_total).
		if strings.Contains(p.Metric, "no_local_endpoints_total") {
			continue
		}
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestServiceStatsCollector(t *testing.T) {
	m := testMetrics()
	fail := false
	read := func() ([]datapath.ServiceDump, error) {
		if fail {
			return nil, errors.New("no pins")
		}
		web := types.NamespacedName{Namespace: "default", Name: "web"}
		http := []datapath.BackendDump{{ID: 1, Connects: 3}, {ID: 2, Connects: 4, Datagrams: 1}}
		// The port's NodePort shares its endpoints' counters: counted once.
		return []datapath.ServiceDump{
			{Frontend: servicemap.Frontend{Service: web, PortName: "http"}, Backends: http},
			{Frontend: servicemap.Frontend{Service: web, PortName: "http", Kind: servicemap.KindNodePort}, Backends: http[1:]},
			{Frontend: servicemap.Frontend{Service: web, PortName: "dns"}, Backends: []datapath.BackendDump{{ID: 3, Datagrams: 9}}},
		}, nil
	}
	if err := m.collectServiceStats(read); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP socklb_service_connections_total connect() calls (TCP, connected UDP) translated to a backend of this Service port, from the BPF stats map.
# TYPE socklb_service_connections_total counter
socklb_service_connections_total{namespace="default",port="dns",service="web"} 0
socklb_service_connections_total{namespace="default",port="http",service="web"} 7
# HELP socklb_service_datagrams_total Unconnected UDP datagrams (sendmsg) translated to a backend of this Service port, from the BPF stats map.
# TYPE socklb_service_datagrams_total counter
socklb_service_datagrams_total{namespace="default",port="dns",service="web"} 9
socklb_service_datagrams_total{namespace="default",port="http",service="web"} 1
# HELP socklb_service_stats_errors_total Scrapes that could not read the BPF stats map.
# TYPE socklb_service_stats_errors_total counter
socklb_service_stats_errors_total 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"socklb_service_connections_total", "socklb_service_datagrams_total", "socklb_service_stats_errors_total"); err != nil {
		t.Error(err)
	}
	fail = true
	if n, err := testutil.GatherAndCount(m.Registry, "socklb_service_connections_total"); err != nil || n != 0 {
		t.Errorf("after a failed read: %d series, err %v", n, err)
	}
	if n, _ := testutil.GatherAndCount(m.Registry, "socklb_service_stats_errors_total"); n != 1 {
		t.Errorf("errors counter missing")
	}
}

func TestNetworkProgrammingBucketsMatchKubeProxy(t *testing.T) {
	b := NetworkProgrammingBuckets()
	if len(b) != 2+59+12+7 || b[0] != 0.25 || b[1] != 0.5 || b[2] != 1 || b[60] != 59 || b[61] != 60 || b[72] != 115 || b[73] != 120 || b[len(b)-1] != 300 {
		t.Errorf("buckets %v", b)
	}
}

// noAddresses stands for a node without interfaces, so tests do not
// depend on the machine's.
func noAddresses() ([]netip.Addr, error) { return nil, nil }

// testMetrics are metrics without an agent: nothing is pending.
func testMetrics() *Metrics { return newMetrics(func() changeCount { return changeCount{} }) }
