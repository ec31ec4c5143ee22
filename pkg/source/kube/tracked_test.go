package kube

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/socklb/socklb/pkg/source"
)

// TestCheckoutNamesTheTouchedServices: each informer event dirties the
// Service it belongs to, a relabelled slice both its old and its new
// Service, a Node event the node; ServiceObjects reads one Service and its
// slices; trigger times come from added and updated slices only.
func TestCheckoutNamesTheTouchedServices(t *testing.T) {
	client, watching := newClient(service("a", nil, 80), service("b", nil, 80), slice("a-1", "a"), node("n1"))
	s, err := New(client, Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	calls := run(t, s, nil)
	await(t, calls, "the first changed()")
	for range 3 {
		await(t, watching, "the watches")
	}
	s.Checkout()
	ctx := context.Background()
	nn := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: name} }
	// checkoutWhen polls until the pending counts say the events arrived.
	checkoutWhen := func(what string, svcs, sls int) source.Changes {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if a, b := s.Pending(); a >= svcs && b >= sls {
				return s.Checkout()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: pending never reached %d services, %d slices", what, svcs, sls)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	moved := slice("a-1", "b")
	trigger := time.Now().Add(time.Second).UTC().Truncate(time.Millisecond)
	moved.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch := checkoutWhen("relabelled slice", 0, 1)
	if got := slices.SortedFunc(maps.Keys(ch.Services), cmpNN); !slices.Equal(got, []types.NamespacedName{nn("a"), nn("b")}) {
		t.Errorf("a slice moved from a to b dirtied %v, want both", got)
	}
	if ts := ch.Triggers[nn("b")]; len(ts) != 1 || !ts[0].Equal(trigger) || len(ch.Triggers[nn("a")]) != 0 {
		t.Errorf("triggers %v, want %v for b only", ch.Triggers, trigger)
	}
	if ch.Node || ch.SliceObjects != 1 || ch.ServiceObjects != 0 {
		t.Errorf("checkout %+v: want 1 slice object, no Service, no node", ch)
	}
	if o := s.ServiceObjects(nn("b")); o.Service == nil || len(o.Slices) != 1 || o.Slices[0].Name != "a-1" {
		t.Errorf("ServiceObjects(b) = %+v, want Service b with slice a-1", o)
	}
	if o := s.ServiceObjects(nn("a")); o.Service == nil || len(o.Slices) != 0 {
		t.Errorf("ServiceObjects(a) = %+v, want Service a without slices", o)
	}

	if err := client.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ch = checkoutWhen("deleted Service", 1, 0)
	if !ch.Services[nn("a")] || len(ch.Services) != 1 {
		t.Errorf("deleting Service a dirtied %v", ch.Services)
	}
	if o := s.ServiceObjects(nn("a")); o.Service != nil {
		t.Errorf("ServiceObjects of a deleted Service = %+v", o)
	}

	if _, err := client.CoreV1().Nodes().Update(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{corev1.LabelTopologyZone: "z2"}}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch = checkoutUntil(t, s, "this Node's update", func(ch source.Changes) bool { return ch.Node })
	if ch.RemoteNodes || len(ch.Services) != 0 {
		t.Errorf("this Node's update: checkout %+v, want the node alone", ch)
	}

	for _, name := range []string{"n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"} {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ch = checkoutUntil(t, s, "other Nodes", func(ch source.Changes) bool { return ch.RemoteNodes && len(s.Nodes()) == 9 })
	if ch.Node || len(ch.Services) != 0 {
		t.Errorf("other Nodes: checkout %+v, want RemoteNodes alone, not Node (a full rebuild)", ch)
	}
	// The lister hands out map order: this node is put first.
	if names := nodeNames(s.Nodes()); len(names) != 9 || names[0] != "n1" {
		t.Errorf("Nodes() = %v, want this node first, then the 8 others", names)
	}
	// NodeInput is read at every Service change, so it lists no other
	// Node: the agent reads those through Nodes when RemoteNodes is set.
	if in := s.NodeInput(); len(in.Nodes) != 1 || in.ThisNode() == nil {
		t.Errorf("NodeInput holds %v, want this node alone", nodeNames(in.Nodes))
	}
}

// checkoutUntil checks out until ok holds, for events that Pending does
// not count.
func checkoutUntil(t *testing.T, s *Source, what string, ok func(source.Changes) bool) source.Changes {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ch := s.Checkout(); ok(ch) {
			return ch
		}
	}
	t.Fatalf("%s: never checked out", what)
	return source.Changes{}
}

func nodeNames(nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// TestNodeEventsWakeOnlyForWhatIsRead: a Node event is recorded, and the
// agent woken, only when it changes what trimNode keeps; this node's
// changes are Node (a full rebuild), the others' RemoteNodes. The handler
// sees the objects as the cache holds them: trimmed.
func TestNodeEventsWakeOnlyForWhatIsRead(t *testing.T) {
	c := newChanges("n1")
	pokes := 0
	h := c.handlers("nodes", func() { pokes++ })
	mk := func(name, rv, addr string, labels map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Reason: rv}}
		return trimNode(n, name == "n1")
	}
	zone := func(z string) map[string]string { return map[string]string{corev1.LabelTopologyZone: z, "other": z} }
	for _, step := range []struct {
		what            string
		do              func()
		node, remote    bool
		pokesAfterwards int
	}{
		{"another Node added", func() { h.OnAdd(mk("n2", "1", "10.0.0.2", nil), false) }, false, true, 1},
		{"its heartbeat (conditions, resourceVersion)", func() { h.OnUpdate(mk("n2", "1", "10.0.0.2", nil), mk("n2", "2", "10.0.0.2", nil)) }, false, false, 1},
		{"its labels, which nobody reads of another node", func() { h.OnUpdate(mk("n2", "2", "10.0.0.2", nil), mk("n2", "3", "10.0.0.2", zone("z"))) }, false, false, 1},
		{"its address", func() { h.OnUpdate(mk("n2", "3", "10.0.0.2", nil), mk("n2", "4", "10.0.0.9", nil)) }, false, true, 2},
		{"this node's heartbeat", func() { h.OnUpdate(mk("n1", "1", "10.0.0.1", zone("a")), mk("n1", "2", "10.0.0.1", zone("a"))) }, false, false, 2},
		{"this node's zone", func() { h.OnUpdate(mk("n1", "2", "10.0.0.1", zone("a")), mk("n1", "3", "10.0.0.1", zone("b"))) }, true, false, 3},
		{"another Node deleted, as a tombstone", func() {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "n2", Obj: mk("n2", "4", "10.0.0.9", nil)})
		}, false, true, 4},
	} {
		step.do()
		ch := c.checkout()
		if ch.Node != step.node || ch.RemoteNodes != step.remote || pokes != step.pokesAfterwards {
			t.Errorf("%s: Node %v RemoteNodes %v after %d pokes, want %v %v %d", step.what, ch.Node, ch.RemoteNodes, pokes, step.node, step.remote, step.pokesAfterwards)
		}
	}
}

func cmpNN(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		return cmpString(a.Namespace, b.Namespace)
	}
	return cmpString(a.Name, b.Name)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestChangesRecordWhenEachArrived: a checkout says, per changed Service,
// when its first change since the last checkout reached the handlers:
// a Service event or a slice event for it, a later one not moving it.
func TestChangesRecordWhenEachArrived(t *testing.T) {
	c := newChanges("n1")
	svcs, sls := c.handlers("services", func() {}), c.handlers("endpointslices", func() {})
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	dbSlice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}}
	webNN, dbNN := types.NamespacedName{Namespace: "default", Name: "web"}, types.NamespacedName{Namespace: "default", Name: "db"}

	before := time.Now()
	svcs.OnAdd(web, false)
	sls.OnAdd(dbSlice, false)
	between := time.Now()
	time.Sleep(5 * time.Millisecond)
	svcs.OnUpdate(web, web)
	ch := c.checkout()
	for nn, lo := range map[types.NamespacedName]time.Time{webNN: before, dbNN: before} {
		got, ok := ch.Received[nn]
		if !ok || got.Before(lo) || got.After(between) {
			t.Errorf("%s received at %v (recorded %v), want its first event, between %v and %v", nn, got, ok, lo, between)
		}
	}
	if len(ch.Received) != 2 {
		t.Errorf("received %v, want web and db", ch.Received)
	}
	if ch := c.checkout(); len(ch.Received) != 0 {
		t.Errorf("a checkout with no event since the last has received %v", ch.Received)
	}
}
