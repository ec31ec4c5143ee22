package agent

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/agent/healthcheck"
	"github.com/socklb/socklb/pkg/servicemap"
)

const timeout = 10 * time.Second

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeHealth is a Health on a clock the test moves.
type fakeHealth struct {
	*Health
	now time.Time
}

func newFakeHealth() *fakeHealth {
	f := &fakeHealth{Health: NewHealth(timeout), now: t0}
	f.Health.Now = func() time.Time { return f.now }
	return f
}

func (f *fakeHealth) at(d time.Duration) time.Time { return t0.Add(d) }
func (f *fakeHealth) set(d time.Duration)          { f.now = t0.Add(d) }

type answer struct {
	code int
	body map[string]any
}

func (f *fakeHealth) get(t *testing.T, path string) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	healthHandler(f.Health).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: body %q: %v", path, rec.Body.String(), err)
	}
	return answer{rec.Code, body}
}

// codes returns what /healthz and /livez answer now.
func (f *fakeHealth) codes(t *testing.T) (healthz, livez int) {
	t.Helper()
	return f.get(t, "/healthz").code, f.get(t, "/livez").code
}

func wantCodes(t *testing.T, f *fakeHealth, what string, healthz, livez int) {
	t.Helper()
	h, l := f.codes(t)
	if h != healthz || l != livez {
		t.Errorf("%s: /healthz %d /livez %d, want %d %d", what, h, l, healthz, livez)
	}
}

func TestHealthQueuedTooLong(t *testing.T) {
	f := newFakeHealth()
	wantCodes(t, f, "fresh", 200, 200)

	// First sync at 1s applies the change queued at 0s.
	f.Health.Queued(f.at(0))
	f.set(time.Second)
	f.Health.Updated(f.at(500 * time.Millisecond))
	wantCodes(t, f, "synced", 200, 200)

	// A change queued at 2s and never applied: fine until it is exactly
	// Timeout old (kube-proxy: unhealthy when now - queued >= timeout).
	f.Health.Queued(f.at(2 * time.Second))
	f.Health.Queued(f.at(5 * time.Second)) // the oldest one counts
	f.set(2*time.Second + timeout - time.Nanosecond)
	wantCodes(t, f, "queued, not late yet", 200, 200)
	f.set(2*time.Second + timeout)
	wantCodes(t, f, "queued for the whole timeout", 503, 503)

	// Applying it makes the node healthy again at once.
	f.Health.Updated(f.now)
	wantCodes(t, f, "applied", 200, 200)
	// Long idle periods are healthy: nothing waits.
	f.set(time.Hour)
	wantCodes(t, f, "idle for an hour", 200, 200)
}

// Before the first sync finishes the agent is starting up (informer caches
// filling): healthy, as kube-proxy is, whatever is queued.
func TestHealthStartingUp(t *testing.T) {
	f := newFakeHealth()
	f.Health.Queued(f.at(0))
	f.set(time.Minute)
	wantCodes(t, f, "queued before the first sync", 200, 200)
	// A first sync that fails ends the start-up grace: the change is still
	// not applied, and has waited a minute.
	f.Health.Failed(f.now)
	wantCodes(t, f, "first sync failed: not ready, but alive", 503, 200)
	f.Health.Updated(f.now)
	wantCodes(t, f, "retry succeeded", 200, 200)
}

// A change that arrives while a sync runs (after its snapshot) is not
// applied by that sync: it still counts as waiting.
func TestHealthChangeDuringSync(t *testing.T) {
	f := newFakeHealth()
	f.Health.Queued(f.at(0))
	snapshot := f.at(time.Second)
	f.Health.Queued(f.at(2 * time.Second)) // after the snapshot
	f.set(3 * time.Second)
	f.Health.Updated(snapshot)
	f.set(time.Second + timeout - time.Nanosecond)
	wantCodes(t, f, "late change, not late yet", 200, 200)
	f.set(time.Second + timeout)
	wantCodes(t, f, "late change never applied", 503, 503)
	f.Health.Updated(f.now)
	wantCodes(t, f, "next sync", 200, 200)
}

// A sync that left a frontend unprogrammed does not count as applying what
// was queued (kube-proxy skips Updated when iptables-restore fails).
func TestHealthFailedSyncIsNotAnUpdate(t *testing.T) {
	f := newFakeHealth()
	f.Health.Updated(f.at(0))
	f.Health.Queued(f.at(time.Second))
	f.set(2 * time.Second)
	f.Health.Failed(f.now)
	f.set(time.Second + timeout)
	wantCodes(t, f, "failing since the change", 503, 200)
}

// TestLivezIgnoresPersistentProgrammingFailure: a frontend that never fits
// (a full map) fails every sync. Restarting the agent cannot fix that, so
// /livez stays 200 while syncs keep running; /healthz (readiness, and load
// balancers' node health) is 503 as kube-proxy's. /livez fails only when
// the loop stops: a change no sync has read for Timeout.
func TestLivezIgnoresPersistentProgrammingFailure(t *testing.T) {
	f := newFakeHealth()
	f.Health.Updated(f.at(0))
	f.Health.Queued(f.at(time.Second))
	for s := 2 * time.Second; s < 10*time.Minute; s += 30 * time.Second { // the retry backoff's cap
		f.set(s)
		f.Health.Failed(f.now)
		f.set(s + 29*time.Second)
		wantCodes(t, f, "retrying a full map", 503, 200)
	}
	// A change arrives and the loop stops reading: now it is stuck.
	f.Health.Queued(f.now)
	f.set(f.now.Sub(t0) + timeout)
	wantCodes(t, f, "sync loop stuck", 503, 503)
	f.Health.Failed(f.now)
	wantCodes(t, f, "loop alive again, still failing", 503, 200)
}

func node(mod func(*corev1.Node)) *corev1.Node {
	n := testkit.Node("node-a", "")
	if mod != nil {
		mod(n)
	}
	return n
}

func TestHealthNodeEligible(t *testing.T) {
	deleting := metav1.NewTime(t0)
	for _, tc := range []struct {
		name    string
		nodes   []*corev1.Node // SyncNode calls in order
		healthz int
	}{
		{"never seen (manifests without a Node)", nil, 200},
		{"plain node", []*corev1.Node{node(nil)}, 200},
		{"being deleted", []*corev1.Node{node(func(n *corev1.Node) { n.DeletionTimestamp = &deleting })}, 503},
		{"autoscaler taint", []*corev1.Node{node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, {Key: ToBeDeletedTaint, Value: "1700000000", Effect: corev1.TaintEffectNoSchedule}}
		})}, 503},
		{"other taints only", []*corev1.Node{node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}
		})}, 200},
		{"seen, then deleted", []*corev1.Node{node(nil), nil}, 503},
		{"taint removed", []*corev1.Node{node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint}}
		}), node(nil)}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeHealth()
			f.Health.Updated(f.now)
			for _, n := range tc.nodes {
				f.Health.SyncNode(n)
			}
			hz := f.get(t, "/healthz")
			if hz.code != tc.healthz {
				t.Errorf("/healthz %d, want %d (%v)", hz.code, tc.healthz, hz.body)
			}
			if got, want := hz.body["nodeEligible"], tc.healthz == 200; got != want {
				t.Errorf("nodeEligible %v, want %v", got, want)
			}
			// /livez never looks at the node: a draining node's agent must
			// not be restarted by its liveness probe.
			lz := f.get(t, "/livez")
			if lz.code != 200 {
				t.Errorf("/livez %d, want 200", lz.code)
			}
			if _, ok := lz.body["nodeEligible"]; ok {
				t.Errorf("/livez body has nodeEligible: %v", lz.body)
			}
		})
	}
}

func TestHealthBody(t *testing.T) {
	f := newFakeHealth()
	f.Health.Updated(f.at(0)) // lastUpdated = t0
	f.Health.Queued(f.at(time.Second))
	f.set(30 * time.Second)
	rfc := func(t time.Time) string { return t.Format(time.RFC3339Nano) }

	// Unhealthy: lastUpdated is the last sync, so a reader sees how stale.
	hz := f.get(t, "/healthz")
	if hz.code != 503 || hz.body["lastUpdated"] != rfc(t0) || hz.body["currentTime"] != rfc(f.now) ||
		hz.body["nodeEligible"] != true || hz.body["healthy"] != false {
		t.Errorf("unhealthy /healthz: %d %v", hz.code, hz.body)
	}
	// Healthy: lastUpdated is now, as kube-proxy answers for compatibility
	// with releases where it was the last sync loop run.
	f.Health.Updated(f.now)
	f.set(31 * time.Second)
	hz = f.get(t, "/healthz")
	if hz.code != 200 || hz.body["lastUpdated"] != rfc(f.now) || hz.body["currentTime"] != rfc(f.now) || hz.body["healthy"] != true {
		t.Errorf("healthy /healthz: %d %v", hz.code, hz.body)
	}
	for _, k := range []string{"lastUpdated", "currentTime", "nodeEligible", "healthy"} {
		if _, ok := hz.body[k]; !ok {
			t.Errorf("/healthz body lacks %q: %v", k, hz.body)
		}
	}
}

func TestHealthCountsAnswers(t *testing.T) {
	f := newFakeHealth()
	m := testMetrics()
	f.Health.healthzTotal, f.Health.livezTotal = m.healthzTotal, m.livezTotal
	f.Health.Updated(f.now)
	f.codes(t)
	f.codes(t)
	f.Health.SyncNode(node(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint}} }))
	f.codes(t)
	for _, c := range []struct {
		name, code string
		want       float64
	}{
		{"healthz", "200", 2}, {"healthz", "503", 1}, {"livez", "200", 3}, {"livez", "503", 0},
	} {
		vec := m.healthzTotal
		if c.name == "livez" {
			vec = m.livezTotal
		}
		if got := testutil.ToFloat64(vec.WithLabelValues(c.code)); got != c.want {
			t.Errorf("socklb_proxy_%s_total{code=%q} = %v, want %v", c.name, c.code, got, c.want)
		}
	}
}

// TestServiceHealthFollowsFailedSyncs: healthCheckNodePorts answer with
// kube-proxy's Health().Healthy (service_health.go: count != 0 &&
// kubeProxyHealthy). A change that only failed syncs followed for Timeout
// makes them 503 while /livez (the loop is alive) stays 200; a node that
// is not eligible does not, that is /healthz's alone; a successful sync
// makes them 200 again. Checked through the server New wires up.
func TestServiceHealthFollowsFailedSyncs(t *testing.T) {
	a, err := New(Config{
		Datapath: &fakeApplier{fail: map[string]bool{}, applied: make(chan servicemap.State, 1)},
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)), HealthTimeout: timeout,
		LocalAddresses: noAddresses,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.closeHealthChecks)
	srv, ok := a.cfg.HealthChecks.(*healthcheck.Server)
	if !ok {
		t.Fatalf("New made a %T, want the healthcheck server", a.cfg.HealthChecks)
	}
	f := &fakeHealth{Health: a.health, now: t0}
	a.health.Now = func() time.Time { return f.now }

	f.Health.Updated(f.at(0))
	f.Health.Queued(f.at(time.Second))
	f.set(2 * time.Second)
	f.Health.Failed(f.now)
	f.set(time.Second + timeout - time.Millisecond)
	if !srv.Healthy() {
		t.Errorf("a change waiting just under the timeout: the per-Service checks are unhealthy")
	}
	f.set(time.Second + timeout)
	f.Health.Failed(f.now)
	if srv.Healthy() {
		t.Errorf("only failed syncs for the timeout: the per-Service checks are healthy; kube-proxy's are 503")
	}
	if _, l := f.codes(t); l != 200 {
		t.Errorf("only failed syncs, the loop alive: /livez %d, want 200", l)
	}
	f.Health.Updated(f.now)
	if !srv.Healthy() {
		t.Errorf("after a successful sync the per-Service checks are unhealthy")
	}
	f.Health.SyncNode(node(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint}} }))
	if h, _ := f.codes(t); h != 503 || !srv.Healthy() {
		t.Errorf("a node being deleted: /healthz %d (want 503), per-Service healthy %v (want true, as kube-proxy's)", h, srv.Healthy())
	}
	f.Health.PinsBroken(errors.New("hook detached"))
	if srv.Healthy() {
		t.Errorf("with a hook detached the per-Service checks are healthy; nothing serves the Service on this node")
	}
}
