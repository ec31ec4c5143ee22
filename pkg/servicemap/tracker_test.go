package servicemap

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// TestTrackerMatchesBuild: a Tracker fed random changes one Service at a
// time (as an informer would: unique names, a slice relabelled dirties its
// old and its new Service) holds, after every step, exactly what Build and
// HealthChecks give from scratch, and its Deltas replayed on the previous
// state give the new one. This node's fact changes must make Update
// refuse; a change of other Nodes alone must not. A quarter of the steps
// run Full instead, as a --manifests source does on every sync: it must
// reuse only what the step left alone. The inputs carry
// externalTrafficPolicy Local, source ranges (valid and malformed),
// nodePorts and several Nodes (decodeExtras). Update gets the node facts
// as the agent hands them over (nodeFacts): this Node alone, the others
// as PeerAddresses, so a Tracker that read other Nodes differs from Build.
func TestTrackerMatchesBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomInput := func() model.Input {
		data := make([]byte, 200+rng.IntN(200))
		// Half the inputs draw mostly small bytes, which pick the first,
		// valid entries of each vocabulary (fuzz_test.go): more objects
		// are usable, so more of the rules between them (claims, twins,
		// source ranges) are exercised than uniform bytes reach.
		small := rng.IntN(2) == 0
		for i := range data {
			if small && rng.IntN(10) < 7 {
				data[i] = byte(rng.IntN(4))
			} else {
				data[i] = byte(rng.IntN(256))
			}
		}
		return decodeInput(data)
	}
	for run := 0; run < 300; run++ {
		in := unique(randomInput())
		var tr Tracker
		st, ps := tr.Full(in)
		checkTracker(t, run, -1, in, &tr, st, ps)
		replayed := cloneState(st)
		for step := 0; step < 20; step++ {
			next, pool := in, randomInput()
			next.Services, next.Slices = slices.Clone(in.Services), slices.Clone(in.Slices)
			otherNodesOnly := false
			switch rng.IntN(10) {
			case 0:
				next.Nodes, next.NodeName, next.LocalAddresses = pool.Nodes, pool.NodeName, pool.LocalAddresses
				next.NodePortAddresses, next.NodePortPrimary = pool.NodePortAddresses, pool.NodePortPrimary
			case 1:
				// The addresses alone, as when a pod's veth comes or goes.
				next.LocalAddresses, next.NodePortAddresses = pool.LocalAddresses, pool.NodePortAddresses
			case 3:
				// This Node object's addresses alone change (order too: the
				// first InternalIP is its primary address).
				if this := in.ThisNode(); this != nil {
					moved := this.DeepCopy()
					if p := pool.ThisNode(); p != nil && rng.IntN(2) == 0 {
						moved.Status.Addresses = p.Status.Addresses
					}
					slices.Reverse(moved.Status.Addresses)
					next.Nodes = slices.Clone(in.Nodes)
					next.Nodes[slices.Index(next.Nodes, this)] = moved
				}
			case 2:
				// Other Nodes come, go or change: this node's facts do not.
				otherNodesOnly = true
				next.Nodes = nil
				if this := in.ThisNode(); this != nil {
					next.Nodes = append(next.Nodes, this)
				}
				for _, n := range pool.Nodes {
					if n.Name != in.NodeName || in.NodeName == "" {
						next.Nodes = append(next.Nodes, n)
					}
				}
			}
			for range 1 + rng.IntN(3) {
				mutate(rng, &next, pool)
			}
			next = unique(next)
			next.PeerAddresses = PeerAddresses(next)
			if rng.IntN(4) == 0 {
				// A --manifests sync: Full on every change, keeping the
				// entries of the Services whose objects and node facts
				// are the last build's.
				st, ps = tr.Full(next)
				replayed = cloneState(st)
				checkTracker(t, run, step, next, &tr, st, ps)
				in = next
				continue
			}
			d, ps, ok := tr.Update(nodeFacts(next), changedObjects(in, next))
			if !ok && otherNodesOnly {
				t.Fatalf("run %d step %d: a change of other Nodes made Update refuse (a full rebuild)", run, step)
			}
			if !ok {
				if newTrackBuilder(next).coreFP == newTrackBuilder(in).coreFP {
					t.Fatalf("run %d step %d: Update refused without a node change", run, step)
				}
				st, ps = tr.Full(next)
				replayed = cloneState(st)
			} else {
				if newTrackBuilder(next).coreFP != newTrackBuilder(in).coreFP {
					t.Fatalf("run %d step %d: Update accepted a node change", run, step)
				}
				for _, k := range d.Remove {
					delete(replayed, k)
				}
				for k, fe := range d.Upsert {
					replayed[k] = fe
				}
				st = tr.State()
			}
			checkTracker(t, run, step, next, &tr, st, ps)
			if !statesEqual(replayed, st) {
				t.Fatalf("run %d step %d: deltas replayed differ from the state:\n%q\n%q", run, step, render(replayed), render(st))
			}
			in = next
		}
	}
}

func checkTracker(t *testing.T, run, step int, in model.Input, tr *Tracker, st State, ps []model.Problem) {
	t.Helper()
	want, wantP := Build(in)
	if !statesEqual(want, st) {
		t.Fatalf("run %d step %d: state differs from Build:\nwant %q\ngot  %q", run, step, render(want), render(st))
	}
	if !slices.Equal(renderProblems(wantP), renderProblems(ps)) {
		t.Fatalf("run %d step %d: problems differ from Build:\nwant %q\ngot  %q", run, step, renderProblems(wantP), renderProblems(ps))
	}
	if hc := HealthChecks(in); !reflect.DeepEqual(hc, tr.HealthChecks()) && len(hc)+len(tr.HealthChecks()) > 0 {
		t.Fatalf("run %d step %d: health checks differ:\nwant %+v\ngot  %+v", run, step, hc, tr.HealthChecks())
	}
	if n := len(unique(in).Services); tr.Services() != n {
		t.Fatalf("run %d step %d: %d Services counted, want %d", run, step, tr.Services(), n)
	}
	tot := Totals{}
	for _, fe := range st {
		tot.Frontends++
		tot.Backends += len(fe.Backends)
	}
	if got := tr.Totals(); got.Frontends != tot.Frontends || got.Backends != tot.Backends {
		t.Fatalf("run %d step %d: totals %+v, counted %+v", run, step, got, tot)
	}
	// Backend entries: kept through the changes as a fresh Full counts
	// them, and never fewer than the state's endpoints of each Service
	// port (what the datapath writes), or admission would let in what
	// does not fit.
	var fresh Tracker
	fresh.Full(in)
	type entry struct {
		svc   types.NamespacedName
		port  string
		proto Protocol
		be    Backend
	}
	written := map[entry]bool{}
	for _, fe := range st {
		for _, b := range fe.Backends {
			written[entry{fe.Service, fe.PortName, fe.Key.Proto, b}] = true
		}
	}
	if got, want := tr.Totals().BackendEntries, fresh.Totals().BackendEntries; got != want || got < len(written) {
		t.Fatalf("run %d step %d: %d backend entries counted, a fresh Full counts %d, the state writes %d", run, step, got, want, len(written))
	}
}

// TestBackendEntriesPerServicePort: a Service port's frontends share its
// endpoints' backend entries (a ClusterIP and its NodePort: 2 endpoints,
// 4 slots), another Service's count apart, as the datapath writes them.
func TestBackendEntriesPerServicePort(t *testing.T) {
	eps := func(name string) *discoveryv1.EndpointSlice {
		return v4("default/"+name+"-1", name, httpPort, ready("10.0.0.1"), ready("10.0.0.2"))
	}
	in := buildCase{
		services: []*corev1.Service{nodePortSvc(), svc("default/other", "10.96.0.11", sport("http", tcp, 80))},
		slices:   []*discoveryv1.EndpointSlice{eps("web"), eps("other")},
		local:    []string{"192.168.1.5", "10.1.0.5"},
	}.input()
	var tr Tracker
	tr.Full(in)
	if got := tr.Totals(); got.Backends != 6 || got.BackendEntries != 4 {
		t.Errorf("totals: %d slots and %d backend entries, want 6 (2 ClusterIPs and a NodePort of 2 endpoints) and 4 (2 per Service)", got.Backends, got.BackendEntries)
	}
	var web Demand
	for _, d := range tr.Demands() {
		if d.Service.Name == "web" {
			web = d
		}
	}
	if web.Frontends != 2 || web.Slots != 4 || web.Backends != 2 {
		t.Errorf("web's demand %+v, want 2 frontends, 4 slots, 2 backends", web)
	}

	// Updates keep the count: web gains an endpoint, other goes.
	nn := types.NamespacedName{Namespace: "default", Name: "web"}
	three := v4("default/web-1", "web", httpPort, ready("10.0.0.1"), ready("10.0.0.2"), ready("10.0.0.3"))
	if _, _, ok := tr.Update(nodeFacts(in), map[types.NamespacedName]ServiceObjects{
		nn:                                    {Service: nodePortSvc(), Slices: []*discoveryv1.EndpointSlice{three}},
		{Namespace: "default", Name: "other"}: {},
	}); !ok {
		t.Fatal("Update refused")
	}
	if got := tr.Totals(); got.Backends != 6 || got.BackendEntries != 3 {
		t.Errorf("after the updates: %d slots and %d backend entries, want 6 and 3", got.Backends, got.BackendEntries)
	}
}

// nodeFacts is what the agent hands Update: source.Tracked's NodeInput
// (this Node alone) with the other Nodes' addresses as a fact.
func nodeFacts(in model.Input) model.Input {
	this := in.ThisNode()
	in.Services, in.Slices, in.Nodes = nil, nil, nil
	if this != nil {
		in.Nodes = []*corev1.Node{this}
	}
	return in
}

// unique keeps the first object of each name, as an informer holds one.
func unique(in model.Input) model.Input {
	seen := map[types.NamespacedName]bool{}
	in.Services = slices.DeleteFunc(slices.Clone(in.Services), func(s *corev1.Service) bool {
		if s == nil || seen[nnOf(s.Namespace, s.Name)] {
			return true
		}
		seen[nnOf(s.Namespace, s.Name)] = true
		return false
	})
	seenSl := map[types.NamespacedName]bool{}
	in.Slices = slices.DeleteFunc(slices.Clone(in.Slices), func(s *discoveryv1.EndpointSlice) bool {
		if s == nil || seenSl[nnOf(s.Namespace, s.Name)] {
			return true
		}
		seenSl[nnOf(s.Namespace, s.Name)] = true
		return false
	})
	return in
}

// mutate adds, replaces or deletes one object, taking new ones from pool.
func mutate(rng *rand.Rand, in *model.Input, pool model.Input) {
	switch rng.IntN(6) {
	case 0:
		if len(pool.Services) > 0 {
			in.Services = append([]*corev1.Service{pool.Services[rng.IntN(len(pool.Services))]}, in.Services...)
		}
	case 1:
		if len(in.Services) > 0 {
			in.Services = slices.Delete(in.Services, 0, 1)
		}
	case 2, 3:
		if len(pool.Slices) > 0 {
			in.Slices = append([]*discoveryv1.EndpointSlice{pool.Slices[rng.IntN(len(pool.Slices))]}, in.Slices...)
		}
	case 4:
		if len(in.Slices) > 0 {
			i := rng.IntN(len(in.Slices))
			in.Slices = slices.Delete(in.Slices, i, i+1)
		}
	case 5:
		// Relabel a slice: it moves from one Service to another.
		if len(in.Slices) > 0 && in.Slices[0] != nil {
			s := in.Slices[0].DeepCopy()
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels[discoveryv1.LabelServiceName] = fzNames[rng.IntN(len(fzNames))]
			in.Slices[0] = s
		}
	}
}

// changedObjects is what an informer-fed change tracker hands Update: every
// Service name whose Service or any of whose slices (under the old label
// or the new) differs between old and cur, with its objects in cur.
func changedObjects(old, cur model.Input) map[types.NamespacedName]ServiceObjects {
	dirty := map[types.NamespacedName]bool{}
	curSvc := byName(cur.Services)
	for _, nn := range changedNames(byName(old.Services), curSvc) {
		dirty[nn] = true
	}
	owner := func(s *discoveryv1.EndpointSlice) types.NamespacedName {
		return nnOf(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
	}
	oldSl, curSl := byName(old.Slices), byName(cur.Slices)
	for _, nn := range changedNames(oldSl, curSl) {
		// A relabelled slice dirties its old Service and its new one.
		for _, s := range []*discoveryv1.EndpointSlice{oldSl[nn], curSl[nn]} {
			if s != nil {
				dirty[owner(s)] = true
			}
		}
	}
	out := map[types.NamespacedName]ServiceObjects{}
	for nn := range dirty {
		objs := ServiceObjects{Service: curSvc[nn]}
		for _, s := range cur.Slices {
			if owner(s) == nn {
				objs.Slices = append(objs.Slices, s)
			}
		}
		out[nn] = objs
	}
	return out
}

// byName indexes objects by namespace/name.
func byName[T metav1.Object](objs []T) map[types.NamespacedName]T {
	out := make(map[types.NamespacedName]T, len(objs))
	for _, o := range objs {
		out[nnOf(o.GetNamespace(), o.GetName())] = o
	}
	return out
}

// changedNames are the names added, removed or pointing at another object
// between old and cur (informers hand out a new object for every change).
func changedNames[T comparable](old, cur map[types.NamespacedName]T) []types.NamespacedName {
	var out []types.NamespacedName
	for nn, o := range cur {
		if p, ok := old[nn]; !ok || p != o {
			out = append(out, nn)
		}
	}
	for nn := range old {
		if _, ok := cur[nn]; !ok {
			out = append(out, nn)
		}
	}
	return out
}

func cloneState(st State) State {
	out := make(State, len(st))
	for k, v := range st {
		out[k] = v
	}
	return out
}

// TestTrackerSourceRangesFollowThePrimaryAddress: a Service that reads the
// node's addresses only through allowFromNode (a ClusterIP Service with a
// load-balancer IP and source ranges) is recomputed when this node's
// primary address moves into or out of its ranges.
func TestTrackerSourceRangesFollowThePrimaryAddress(t *testing.T) {
	s := withSourceRanges(withIngress(svc("default/web", "10.96.0.10", sport("http", tcp, 80)), ingress("203.0.113.7", nil)), "10.1.0.0/16")
	in := model.Input{Services: []*corev1.Service{s}, NodeName: "node-a",
		Nodes: []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.0.2.5", "InternalIP=10.1.0.5")}}
	var tr Tracker
	tr.Full(in)
	for _, addrs := range [][]string{{"InternalIP=10.1.0.5", "InternalIP=192.0.2.5"}, {"InternalIP=192.0.2.5"}} {
		in.Nodes = []*corev1.Node{node("node-a", "zone-a", addrs...)}
		if _, _, ok := tr.Update(in, nil); !ok {
			t.Fatalf("%v: Update refused an address change", addrs)
		}
		want, _ := Build(in)
		if !statesEqual(want, tr.State()) {
			t.Fatalf("%v: state differs from Build:\nwant %q\ngot  %q", addrs, render(want), render(tr.State()))
		}
	}
}

// TestTrackerExternalIPsFollowOtherNodes: an externalIP that is another
// Node's address is captured while that Node holds it, so a change of
// other Nodes alone (no Service event) adds and removes the frontend. As
// in the agent, Update sees this Node alone and the others' addresses as
// PeerAddresses, made again because they changed.
func TestTrackerExternalIPsFollowOtherNodes(t *testing.T) {
	s := withExternalIPs(svc("default/web", "10.96.0.10", sport("http", tcp, 80)), "192.0.2.7")
	me := node("node-a", "zone-a", "InternalIP=192.0.2.5")
	in := model.Input{Services: []*corev1.Service{s}, NodeName: "node-a", Nodes: []*corev1.Node{me}, ExternalIPCIDRs: []netip.Prefix{}}
	var tr Tracker
	tr.Full(in)
	for _, peer := range []string{"InternalIP=192.0.2.7", "InternalIP=192.0.2.8", "ExternalIP=192.0.2.7"} {
		in.Nodes = []*corev1.Node{me, node("node-b", "zone-a", peer)}
		in.PeerAddresses = PeerAddresses(in)
		if _, _, ok := tr.Update(nodeFacts(in), nil); !ok {
			t.Fatalf("%s: Update refused a change of another Node", peer)
		}
		want, _ := Build(in)
		if !statesEqual(want, tr.State()) {
			t.Fatalf("%s: state differs from Build:\nwant %q\ngot  %q", peer, render(want), render(tr.State()))
		}
		_, captured := tr.State()[FrontendKey{Addr: netip.MustParseAddr("192.0.2.7"), Port: 80, Proto: TCP}]
		if captured != (peer != "InternalIP=192.0.2.8") {
			t.Errorf("%s: externalIP 192.0.2.7 captured = %v", peer, captured)
		}
	}
}

// TestTrackerChangeCostsNoOtherNodes: an endpoint change costs the same
// with 5 000 other Nodes as with one. Update compares the node facts at
// every change; the other Nodes' 10 000 addresses enter them by their
// digest, made once when they changed, and are never read from Nodes
// (which hold every Node here, to show it): a Tracker that computed them
// again or formatted them into its fingerprint allocates with each.
func TestTrackerChangeCostsNoOtherNodes(t *testing.T) {
	api := svc("default/api", "10.96.0.11", sport("http", tcp, 80))
	slice := func(n int) []*discoveryv1.EndpointSlice {
		eps := []discoveryv1.Endpoint{ready("10.0.0.1"), ready("10.0.0.2")}
		return []*discoveryv1.EndpointSlice{v4("default/api-1", "api", httpPort, eps[:n]...)}
	}
	cluster := func(others int) model.Input {
		in := model.Input{Services: []*corev1.Service{api}, Slices: slice(2), NodeName: "node-a",
			Nodes: []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.0.2.5")}}
		for i := range others {
			in.Nodes = append(in.Nodes, node(fmt.Sprintf("node-%d", i), "zone-a",
				fmt.Sprintf("InternalIP=10.1.%d.%d", i/250, i%250+1), fmt.Sprintf("ExternalIP=2001:db8::%x", i+1)))
		}
		in.PeerAddresses = PeerAddresses(in)
		return in
	}
	allocs := func(in model.Input) float64 {
		var tr Tracker
		tr.Full(in)
		nn := nnOf("default", "api")
		i := 0
		return testing.AllocsPerRun(50, func() {
			i++
			changed := map[types.NamespacedName]ServiceObjects{nn: {Service: api, Slices: slice(2 - i%2)}}
			if d, _, ok := tr.Update(in, changed); !ok || len(d.Upsert) != 1 {
				t.Fatalf("an endpoint change: ok %v, %d frontends written, want 1", ok, len(d.Upsert))
			}
		})
	}
	few, many := cluster(1), cluster(5000)
	if n := len(many.PeerAddresses.Addrs()); n != 10000 {
		t.Fatalf("test setup: %d other Nodes' addresses, want 10000", n)
	}
	if a, b := allocs(few), allocs(many); b > a {
		t.Errorf("an endpoint change allocates %v times with 5000 other Nodes, %v with one: it reads their addresses", b, a)
	}
}

// TestTrackerFullReuse: Full keeps the computed entry of a Service whose
// objects (by pointer: informers and the manifests reader hand out a new
// object for every change) and node facts are those of the last build;
// a --manifests source runs Full on every sync, so this path serves most
// Services there. Each case changes one thing between two Fulls: the
// second must still equal Build, and the Services the change does not
// touch must keep their entries (else the cases would not reach the
// reuse at all).
func TestTrackerFullReuse(t *testing.T) {
	web := nodePortSvc() // reads this node's interface addresses
	webSlice := v4("default/web-1", "web", httpPort, ready("10.0.0.1"))
	// ext's externalIP is node-b's address, captured while node-b has it.
	ext := withExternalIPs(svc("default/ext", "10.96.0.20", sport("http", tcp, 80)), "192.0.2.7")
	plain := svc("default/plain", "10.96.0.30", sport("http", tcp, 80))
	plainSlice := v4("default/plain-1", "plain", httpPort, ready("10.0.1.1"))
	me := node("node-a", "zone-a", "InternalIP=192.0.2.5")
	input := func() model.Input {
		in := model.Input{
			Services:       []*corev1.Service{web, ext, plain},
			Slices:         []*discoveryv1.EndpointSlice{webSlice, plainSlice},
			NodeName:       "node-a",
			Nodes:          []*corev1.Node{me, node("node-b", "zone-a", "InternalIP=192.0.2.7")},
			LocalAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.5")},
			// Empty: externalIPs are captured only when they are node
			// addresses, so ext reads the other Nodes' addresses.
			ExternalIPCIDRs: []netip.Prefix{},
		}
		in.PeerAddresses = PeerAddresses(in) // as the agent hands them over
		return in
	}
	for _, tc := range []struct {
		name   string
		change func(in *model.Input)
		reused []string // entries that must be kept, as namespace/name
		noop   bool     // the change leaves the state as it was
	}{
		{
			name:   "nothing changes",
			change: func(*model.Input) {},
			reused: []string{"default/web", "default/ext", "default/plain"},
			noop:   true,
		},
		{
			// web is computed again (it reads them), and its NodePort,
			// one frontend at 0.0.0.0 looked up through node_addrs,
			// stays as it was.
			name:   "this node's interface addresses change: web's NodePort stays the one wildcard",
			change: func(in *model.Input) { in.LocalAddresses = []netip.Addr{netip.MustParseAddr("10.1.0.5")} },
			noop:   true,
		},
		{
			name: "another Node's address changes: ext's externalIP is no longer captured",
			change: func(in *model.Input) {
				in.Nodes = []*corev1.Node{me, node("node-b", "zone-a", "InternalIP=192.0.2.8")}
				in.PeerAddresses = PeerAddresses(*in)
			},
		},
		{
			name: "plain is replaced by a changed copy (another port)",
			change: func(in *model.Input) {
				p := plain.DeepCopy()
				p.Spec.Ports[0].Port = 81
				in.Services = []*corev1.Service{web, ext, p}
			},
			reused: []string{"default/web", "default/ext"},
		},
		{
			name: "plain's slice is replaced (another endpoint)",
			change: func(in *model.Input) {
				in.Slices = []*discoveryv1.EndpointSlice{webSlice, v4("default/plain-1", "plain", httpPort, ready("10.0.1.2"))}
			},
			reused: []string{"default/web", "default/ext"},
		},
		{
			name: "plain gets a second slice",
			change: func(in *model.Input) {
				in.Slices = append(in.Slices, v4("default/plain-2", "plain", httpPort, ready("10.0.1.3")))
			},
			reused: []string{"default/web", "default/ext"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			first, _ := tr.Full(input())
			first = cloneState(first)
			before := map[types.NamespacedName][]offer{}
			for nn, e := range tr.entries {
				before[nn] = e.offers
			}
			in := input()
			tc.change(&in)
			st, ps := tr.Full(in)
			want, wantP := Build(in)
			if !statesEqual(want, st) {
				t.Errorf("state differs from Build:\nwant %q\ngot  %q", render(want), render(st))
			}
			if !slices.Equal(renderProblems(wantP), renderProblems(ps)) {
				t.Errorf("problems differ from Build:\nwant %q\ngot  %q", renderProblems(wantP), renderProblems(ps))
			}
			if same := statesEqual(first, want); same != tc.noop {
				t.Errorf("the state is the same after the change: %v, want %v; the case does not test what it says", same, tc.noop)
			}
			for _, name := range tc.reused {
				ns, n, _ := strings.Cut(name, "/")
				nn := nnOf(ns, n)
				// The same backing array: the offers were kept, not
				// computed again (every Service here has offers).
				if e := tr.entries[nn]; e == nil || len(e.offers) == 0 || &e.offers[0] != &before[nn][0] {
					t.Errorf("%s was computed again; its objects and the node facts did not change", name)
				}
			}
		})
	}
}
