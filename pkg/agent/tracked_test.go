package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// fakeTracked is a source.Tracked over a map of Services: put replaces
// one Service's objects in O(1) and records the change, as the kube
// source's informer handlers do.
type fakeTracked struct {
	mu     sync.Mutex
	byName map[types.NamespacedName]servicemap.ServiceObjects
	nodes  []*corev1.Node
	dirty  map[types.NamespacedName]bool
	// received: when each dirty Service's first change arrived.
	received map[types.NamespacedName]time.Time
	node     bool
	remote   bool
	// nodesCalls counts Nodes(): the other Nodes are read only when needed.
	nodesCalls int
	kick       func()
	ready      chan struct{}
}

var _ source.Tracked = (*fakeTracked)(nil)

func newFakeTracked(in model.Input) *fakeTracked {
	f := &fakeTracked{byName: map[types.NamespacedName]servicemap.ServiceObjects{}, dirty: map[types.NamespacedName]bool{},
		received: map[types.NamespacedName]time.Time{}, nodes: in.Nodes, ready: make(chan struct{})}
	for _, s := range in.Services {
		nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		o := f.byName[nn]
		o.Service = s
		f.byName[nn] = o
	}
	for _, s := range in.Slices {
		nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		o := f.byName[nn]
		o.Slices = append(o.Slices, s)
		f.byName[nn] = o
	}
	return f
}

func (f *fakeTracked) Run(ctx context.Context, changed func()) error {
	f.mu.Lock()
	f.kick = changed
	f.mu.Unlock()
	close(f.ready)
	changed()
	<-ctx.Done()
	return nil
}

func (f *fakeTracked) put(nn types.NamespacedName, o servicemap.ServiceObjects) {
	f.putAt(nn, o, time.Now())
}

// putAt is put of a change that reached the agent at received.
func (f *fakeTracked) putAt(nn types.NamespacedName, o servicemap.ServiceObjects, received time.Time) {
	f.mu.Lock()
	f.byName[nn] = o
	f.dirty[nn] = true
	if _, ok := f.received[nn]; !ok {
		f.received[nn] = received
	}
	kick := f.kick
	f.mu.Unlock()
	if kick != nil {
		kick()
	}
}

func (f *fakeTracked) setNodes(nodes []*corev1.Node) {
	f.mu.Lock()
	f.nodes, f.node = nodes, true
	kick := f.kick
	f.mu.Unlock()
	kick()
}

// setOtherNodes replaces the Nodes other than node-a, as the kube source
// reports them: RemoteNodes, not Node.
func (f *fakeTracked) setOtherNodes(nodes ...*corev1.Node) {
	f.mu.Lock()
	f.nodes = slices.DeleteFunc(slices.Clone(f.nodes), func(n *corev1.Node) bool { return n.Name != "node-a" })
	f.nodes, f.remote = append(f.nodes, nodes...), true
	kick := f.kick
	f.mu.Unlock()
	if kick != nil {
		kick()
	}
}

func (f *fakeTracked) Snapshot() model.Input {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := model.Input{NodeName: "node-a", Nodes: f.nodes}
	for _, o := range f.byName {
		if o.Service != nil {
			in.Services = append(in.Services, o.Service)
		}
		in.Slices = append(in.Slices, o.Slices...)
	}
	return in
}

func (f *fakeTracked) Checkout() source.Changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := source.Changes{Services: f.dirty, Received: f.received, Node: f.node, RemoteNodes: f.remote, SliceObjects: len(f.dirty)}
	f.dirty, f.received, f.node, f.remote = map[types.NamespacedName]bool{}, map[types.NamespacedName]time.Time{}, false, false
	return ch
}

func (f *fakeTracked) Pending() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 0, len(f.dirty)
}

func (f *fakeTracked) ServiceObjects(nn types.NamespacedName) servicemap.ServiceObjects {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[nn]
}

func (f *fakeTracked) NodeInput() model.Input {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := model.Input{NodeName: "node-a"}
	for _, n := range f.nodes {
		if n.Name == in.NodeName {
			in.Nodes = append(in.Nodes, n)
		}
	}
	return in
}

func (f *fakeTracked) Nodes() []*corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodesCalls++
	return slices.Clone(f.nodes)
}

// runTracked runs an agent on src until the test ends: cfg's Datapath and
// Log, with a minute's health timeout, no health check server and an
// hourly resync unless cfg says otherwise. wait returns whether the next
// sync programmed everything.
func runTracked(t *testing.T, src *fakeTracked, cfg Config) (a *Agent, wait func() bool) {
	t.Helper()
	if cfg.HealthTimeout == 0 {
		cfg.HealthTimeout = time.Minute
	}
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = time.Hour
	}
	cfg.HealthChecks, cfg.LocalAddresses = nopHealthChecks{}, noAddresses
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan bool, 100)
	a.afterSync = func(ok bool) { synced <- ok }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })
	return a, func() bool {
		t.Helper()
		select {
		case ok := <-synced:
			return ok
		case <-time.After(5 * time.Second):
			t.Fatal("no sync within 5s")
			return false
		}
	}
}

// deltaApplier keeps a State from Apply and ApplyDelta calls, and counts
// each kind.
type deltaApplier struct {
	mu          sync.Mutex
	state       servicemap.State
	full, delta int
	last        servicemap.Delta
	fail        map[string]bool
}

func (d *deltaApplier) Apply(st servicemap.State) datapath.ApplyResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.full++
	d.state = servicemap.State{}
	for k, fe := range st {
		d.state[k] = fe
	}
	return datapath.ApplyResult{Upserted: len(st)}
}

func (d *deltaApplier) ApplyDelta(delta servicemap.Delta) datapath.ApplyResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delta++
	d.last = delta
	res := datapath.ApplyResult{Failed: map[servicemap.FrontendKey]error{}}
	for _, k := range delta.Remove {
		delete(d.state, k)
		res.Removed++
	}
	for k, fe := range delta.Upsert {
		if d.fail[fe.Service.Name] {
			res.Failed[k] = errors.New("services map full")
			continue
		}
		d.state[k] = fe
		res.Upserted++
	}
	return res
}

func (d *deltaApplier) snapshot() (servicemap.State, int, int, servicemap.Delta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state, d.full, d.delta, d.last
}

// TestSyncWritesOnlyTheChange: with a tracked source, the first sync is
// full, an EndpointSlice change reaches the datapath as a Delta holding
// that Service's frontend alone, a frontend that failed is retried in the
// next Delta, a node change and the periodic resync rebuild everything,
// and the datapath always ends equal to Build of the objects.
func TestSyncWritesOnlyTheChange(t *testing.T) {
	in := bigSnapshot(50)
	src := newFakeTracked(in)
	dp := &deltaApplier{fail: map[string]bool{}}
	_, wait := runTracked(t, src, Config{Datapath: dp, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryMin: time.Hour})
	check := func(step string) {
		t.Helper()
		st, _, _, _ := dp.snapshot()
		want, _ := servicemap.Build(src.Snapshot())
		if len(st) != len(want) {
			t.Fatalf("%s: datapath holds %d frontends, Build gives %d", step, len(st), len(want))
		}
		for k, fe := range want {
			if got, ok := st[k]; !ok || !got.Equal(fe) {
				t.Fatalf("%s: %s is %+v, want %+v", step, k, got, fe)
			}
		}
	}
	wait()
	if _, full, delta, _ := dp.snapshot(); full != 1 || delta != 0 {
		t.Fatalf("first sync: %d full applies and %d deltas, want 1 and 0", full, delta)
	}
	check("first sync")

	nn := types.NamespacedName{Namespace: "default", Name: "svc-7"}
	o := src.ServiceObjects(nn)
	sl := o.Slices[0].DeepCopy()
	sl.Endpoints = sl.Endpoints[:3]
	src.put(nn, servicemap.ServiceObjects{Service: o.Service, Slices: []*discoveryv1.EndpointSlice{sl}})
	wait()
	_, full, delta, last := dp.snapshot()
	if full != 1 || delta != 1 || len(last.Upsert) != 1 || len(last.Remove) != 0 {
		t.Fatalf("one slice change: %d full, %d deltas, last %d upserts %d removals; want 1, 1, 1, 0", full, delta, len(last.Upsert), len(last.Remove))
	}
	for _, fe := range last.Upsert {
		if fe.Service != nn || len(fe.Backends) != 3 {
			t.Fatalf("delta wrote %s with %d backends, want %s with 3", fe.Service, len(fe.Backends), nn)
		}
	}
	check("slice change")

	// A Service that fails is retried by the next delta, whatever it holds.
	dp.mu.Lock()
	dp.fail["svc-8"] = true
	dp.mu.Unlock()
	nn8 := types.NamespacedName{Namespace: "default", Name: "svc-8"}
	src.put(nn8, servicemap.ServiceObjects{Service: src.ServiceObjects(nn8).Service})
	if wait() {
		t.Fatal("a failed frontend reported success")
	}
	dp.mu.Lock()
	dp.fail["svc-8"] = false
	dp.mu.Unlock()
	src.put(nn, o)
	wait()
	if _, _, _, last := dp.snapshot(); len(last.Upsert) != 2 {
		t.Fatalf("the delta after a failure holds %d frontends, want 2 (the change and the retry)", len(last.Upsert))
	}
	check("retry")

	// Deleting a Service removes its frontend.
	src.put(nn, servicemap.ServiceObjects{})
	wait()
	if _, _, _, last := dp.snapshot(); len(last.Remove) != 1 {
		t.Fatalf("deleting a Service removed %d frontends, want 1", len(last.Remove))
	}
	check("delete")

	node := &corev1.Node{}
	node.Name = "node-a"
	src.setNodes([]*corev1.Node{node})
	wait()
	if _, full, _, _ := dp.snapshot(); full != 2 {
		t.Fatalf("a node change: %d full applies, want 2", full)
	}
	check("node change")
}

// TestAgentTimesEachChangeFromItsArrival: socklb_event_to_programmed_
// duration_seconds times each changed Service from its change reaching
// the agent to the sync that wrote it, once per Service whatever the
// number of its changes in between (the earliest counts), and not for a
// Service whose frontend failed to program.
func TestAgentTimesEachChangeFromItsArrival(t *testing.T) {
	const name = "socklb_event_to_programmed_duration_seconds"
	src := newFakeTracked(bigSnapshot(5))
	dp := &deltaApplier{fail: map[string]bool{}}
	a, wait := runTracked(t, src, Config{Datapath: dp, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryMin: time.Hour})
	wait()
	if n := countOf(t, a.metrics, name); n != 0 {
		t.Fatalf("%d samples after the first sync, which read no change event, want 0", n)
	}

	// Two changes of svc-1, the first 400 ms before the agent could see
	// it (a busy agent), and one of svc-2, now, read by one sync.
	nn1 := types.NamespacedName{Namespace: "default", Name: "svc-1"}
	nn2 := types.NamespacedName{Namespace: "default", Name: "svc-2"}
	o1, o2 := src.ServiceObjects(nn1), src.ServiceObjects(nn2)
	src.mu.Lock() // both land before the agent's next checkout
	kick := src.kick
	src.kick = nil
	src.mu.Unlock()
	src.putAt(nn1, trimmed(o1, 3), time.Now().Add(-400*time.Millisecond))
	src.put(nn1, trimmed(o1, 2))
	src.put(nn2, trimmed(o2, 2))
	src.mu.Lock()
	src.kick = kick
	src.mu.Unlock()
	kick()
	wait()
	if n := countOf(t, a.metrics, name); n != 2 {
		t.Fatalf("%d samples for two changed Services, want 2", n)
	}
	if s := sumOf(t, a.metrics, name); s < 0.4 || s > 5 {
		t.Errorf("samples sum to %.3fs, want a little over 0.4s (svc-1 timed from its first change)", s)
	}

	// A change whose frontend fails is not in the maps: not timed.
	dp.mu.Lock()
	dp.fail["svc-3"] = true
	dp.mu.Unlock()
	nn3 := types.NamespacedName{Namespace: "default", Name: "svc-3"}
	src.put(nn3, trimmed(src.ServiceObjects(nn3), 2))
	if ok := wait(); ok {
		t.Fatal("the sync with a failing frontend reported success")
	}
	if n := countOf(t, a.metrics, name); n != 2 {
		t.Errorf("%d samples after a change that failed to program, want still 2", n)
	}
}

// trimmed is o with its first slice cut to n endpoints.
func trimmed(o servicemap.ServiceObjects, n int) servicemap.ServiceObjects {
	sl := o.Slices[0].DeepCopy()
	sl.Endpoints = sl.Endpoints[:n]
	return servicemap.ServiceObjects{Service: o.Service, Slices: []*discoveryv1.EndpointSlice{sl}}
}
