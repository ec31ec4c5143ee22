package servicemap

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// Tracker keeps the desired state between syncs so that a change costs
// the Services it touches, not the cluster: Update recomputes only the
// Services it is handed, re-decides only the frontend keys they offered
// before or offer now, and returns just the frontends that changed.
// kube-proxy's ServiceChangeTracker and EndpointsChangeTracker hand its
// proxier the changed objects too, but the proxier then writes every rule
// again; here the output is a Delta the datapath applies as it is.
//
// Full is the reference path: it rebuilds everything from a snapshot, and
// after Full or any sequence of Updates the state, the problems and the
// health checks equal what Build and HealthChecks give for the same
// objects (TestTrackerMatchesBuild). Cross-Service effects stay exact:
// two Services offering one key are re-decided whenever either changes
// (claim.go's order), and a change of the node facts every Service reads
// makes Update refuse, so the caller runs Full.
//
// The zero Tracker is ready to use; it is not safe for concurrent use.
type Tracker struct {
	fp      string // the node facts the entries were computed with
	coreFP  string // the part of fp every Service reads
	started bool
	entries map[types.NamespacedName]*trackEntry
	// claims lists, per key, every offer for it, as (Service, offer index).
	claims map[FrontendKey][]claimRef
	state  State

	nodeProblems []model.Problem
	withProblems map[types.NamespacedName]bool
	problems     []model.Problem
	problemsOld  bool
	withChecks   map[types.NamespacedName]bool
	checks       []HealthCheck
	checksOld    bool
	totals       Totals
	services     int
	// backendEntries sums the entries' backendEntries (Totals.BackendEntries).
	backendEntries int
}

// ServiceObjects is one Service and the EndpointSlices labelled with its
// name. A nil Service is a Service that is gone (or not proxied); slices
// under a name with an empty Name are the namespace's slices that lack the
// kubernetes.io/service-name label.
type ServiceObjects struct {
	Service *corev1.Service
	Slices  []*discoveryv1.EndpointSlice
}

// Delta is what one Update changed: frontends to write, keys to remove.
type Delta struct {
	Upsert State
	Remove []FrontendKey
}

// Totals are the state's sizes, kept as it changes so metrics need not
// walk every frontend.
type Totals struct {
	// Backends counts the endpoints of every frontend (the slots they
	// take); BackendEntries those of every Service port, which its
	// frontends share (the backend entries they take), counted per
	// Service as computed, so an endpoint of two Services counts twice
	// and one of a frontend that lost its key still counts.
	Frontends, Backends, BackendEntries int
	// Ranges counts the source ranges of every frontend.
	Ranges int
	// NoLocal counts, per traffic policy ("internal", "external"),
	// the Services with a frontend whose policy leaves no endpoint here.
	NoLocal map[string]map[types.NamespacedName]int
}

type trackEntry struct {
	svc      *corev1.Service
	slices   []*discoveryv1.EndpointSlice
	offers   []offer
	problems []model.Problem       // from the Service's own objects
	lost     map[int]model.Problem // offer index -> why it lost its key
	checks   []HealthCheck
	// backendEntries is backendEntries(offers), kept with them.
	backendEntries int
}

// backendEntries counts the distinct endpoints of each Service port and
// family among offers: the backend entries the datapath shares between
// the port's frontends.
func backendEntries(offers []offer) int {
	type entry struct {
		port  string
		proto Protocol
		be    Backend
	}
	seen := map[entry]bool{}
	add := func(fe *Frontend) {
		for _, b := range fe.Backends {
			seen[entry{fe.PortName, fe.Key.Proto, b}] = true
		}
	}
	for i := range offers {
		if offers[i].shadow {
			continue
		}
		add(&offers[i].fe)
		if offers[i].twin != nil {
			add(offers[i].twin)
		}
	}
	return len(seen)
}

type claimRef struct {
	svc types.NamespacedName
	idx int
}

// trackBuilder is a builder holding the node facts, and what else the
// per-Service computations read.
type trackBuilder struct {
	*builder
	fp         string // every node fact: coreFP and the addresses
	coreFP     string // the node facts every Service reads
	hcFilter   []netip.Prefix
	localAddrs []netip.Addr
}

func newTrackBuilder(in model.Input) trackBuilder {
	b := &builder{node: nodeFromInput(in)}
	b.nodeAddrs = b.nodePortAddresses(in)
	b.ownAddrs = ownAddresses(in)
	b.peerAddrs = in.PeerAddresses
	b.extCIDRs = in.ExternalIPCIDRs
	b.primary = primaryAddrs(in.ThisNode())
	tb := trackBuilder{builder: b, hcFilter: healthCheckFilter(in), localAddrs: in.LocalAddresses}
	// The node's addresses change whenever a pod starts (its host-side
	// veth gets an IPv6 link-local address), and only Services with
	// NodePorts, externalIPs or health checks read them: they are kept
	// apart so such a change recomputes those Services, not every one.
	// The other Nodes' addresses enter by their digest: a change of one
	// Service must not format thousands of them.
	tb.coreFP = fmt.Sprint(b.node, b.extCIDRs)
	tb.fp = tb.coreFP + fmt.Sprint(b.nodeAddrs, b.ownAddrs, b.peerAddrs.Sum(), b.primary, tb.hcFilter, tb.localAddrs)
	return tb
}

// State is the current desired state; the caller must not modify it.
func (t *Tracker) State() State { return t.state }

// Totals are the current state's sizes; the caller must not modify them.
func (t *Tracker) Totals() Totals {
	tot := t.totals
	tot.BackendEntries = t.backendEntries
	return tot
}

// Services counts the Services the tracker holds.
func (t *Tracker) Services() int { return t.services }

// Full rebuilds everything from a snapshot, as Build does. A Service whose
// objects are the same (pointer identity) under the same
// node facts keeps its computed offers: informer caches hand out a new
// object for every change and never modify one in place.
func (t *Tracker) Full(in model.Input) (State, []model.Problem) {
	tb := newTrackBuilder(in)
	nodeProblems := tb.problems
	reuse := t.started && tb.fp == t.fp
	old := t.entries
	t.entries = make(map[types.NamespacedName]*trackEntry, len(in.Services))
	t.services, t.backendEntries = 0, 0
	t.withProblems = map[types.NamespacedName]bool{}
	t.withChecks = map[types.NamespacedName]bool{}

	svcs := map[types.NamespacedName]*corev1.Service{}
	dups := map[types.NamespacedName]int{}
	for _, s := range in.Services {
		if s == nil {
			continue
		}
		nn := nnOf(s.Namespace, s.Name)
		if _, ok := svcs[nn]; ok {
			dups[nn]++
			continue
		}
		svcs[nn] = s
	}
	groups := groupSlices(in.Slices)
	for nn := range groups {
		if _, ok := svcs[nn]; !ok {
			svcs[nn] = nil
		}
	}
	for nn, svc := range svcs {
		var e *trackEntry
		if prev := old[nn]; reuse && prev != nil && prev.svc == svc && slices.Equal(prev.slices, groups[nn]) {
			e = &trackEntry{svc: prev.svc, slices: prev.slices, offers: prev.offers, problems: prev.problems, checks: prev.checks, backendEntries: prev.backendEntries}
		} else {
			e = tb.compute(nn, svc, groups[nn])
		}
		for range dups[nn] {
			// After the first copy's own problems, as Build reports it.
			e.problems = append(slices.Clip(e.problems), model.Problem{Kind: model.KindService, Object: nn,
				Reason: "appears more than once in the input; only the first copy is used, remove the duplicate"})
		}
		t.put(nn, e)
	}

	t.fp, t.coreFP, t.started = tb.fp, tb.coreFP, true
	t.nodeProblems = nodeProblems
	t.claims = make(map[FrontendKey][]claimRef, len(t.entries))
	touched := make(map[FrontendKey]bool, len(t.entries))
	for nn, e := range t.entries {
		for i, o := range e.offers {
			t.claims[o.fe.Key] = append(t.claims[o.fe.Key], claimRef{nn, i})
			touched[o.fe.Key] = true
		}
	}
	t.state = make(State, len(touched))
	t.totals = Totals{NoLocal: map[string]map[types.NamespacedName]int{}}
	t.resolve(touched, nil)
	t.problemsOld, t.checksOld = true, true
	return t.state, t.Problems()
}

// Update recomputes the Services in changed (the Service and all its
// slices, as they are now) and returns the frontends that changed. node
// carries the node facts (its Services and Slices are not read); when
// they differ from the last build's, or before the first Full, ok is
// false and nothing was changed: call Full.
func (t *Tracker) Update(node model.Input, changed map[types.NamespacedName]ServiceObjects) (d Delta, problems []model.Problem, ok bool) {
	tb := newTrackBuilder(node)
	if !t.started || tb.coreFP != t.coreFP {
		return Delta{}, nil, false
	}
	if tb.fp != t.fp {
		changed = t.withAddressReaders(changed)
		t.fp = tb.fp
	}
	if !slices.Equal(tb.problems, t.nodeProblems) {
		t.nodeProblems = tb.problems
		t.problemsOld = true
	}
	touched := map[FrontendKey]bool{}
	for nn, objs := range changed {
		if prev := t.entries[nn]; prev != nil {
			for i, o := range prev.offers {
				t.unclaim(o.fe.Key, claimRef{nn, i})
				touched[o.fe.Key] = true
			}
			t.drop(nn)
		}
		sl := slices.DeleteFunc(slices.Clone(objs.Slices), func(s *discoveryv1.EndpointSlice) bool {
			_, headless := s.Labels[corev1.IsHeadlessService]
			return s == nil || headless
		})
		slices.SortStableFunc(sl, compareSlice)
		e := tb.compute(nn, objs.Service, sl)
		t.put(nn, e)
		for i, o := range e.offers {
			t.claims[o.fe.Key] = append(t.claims[o.fe.Key], claimRef{nn, i})
			touched[o.fe.Key] = true
		}
	}
	d = Delta{Upsert: State{}}
	t.resolve(touched, &d)
	return d, t.Problems(), true
}

// compute runs Build's per-Service work for one name.
func (tb trackBuilder) compute(nn types.NamespacedName, svc *corev1.Service, sl []*discoveryv1.EndpointSlice) *trackEntry {
	tb.offers, tb.problems = nil, nil
	e := &trackEntry{svc: svc, slices: sl}
	own := sl
	if nn.Name == "" {
		// Unlabelled slices belong to no Service, not even one named "".
		for _, s := range sl {
			tb.unlabelled(s)
		}
		own = nil
	}
	if svc != nil {
		tb.addService(svc, own)
	}
	e.offers, e.problems = tb.offers, tb.problems
	e.backendEntries = backendEntries(e.offers)
	if svc != nil {
		e.checks = tb.healthChecksOf(svc, own, tb.hcFilter, tb.localAddrs)
	}
	tb.offers, tb.problems = nil, nil
	return e
}

// put stores e under nn, unless it holds nothing (slices of a Service
// that does not exist yet).
func (t *Tracker) put(nn types.NamespacedName, e *trackEntry) {
	if e.svc == nil && len(e.offers) == 0 && len(e.problems) == 0 {
		return
	}
	if t.entries == nil {
		t.entries = map[types.NamespacedName]*trackEntry{}
	}
	t.entries[nn] = e
	t.backendEntries += e.backendEntries
	if e.svc != nil {
		t.services++
	}
	if len(e.problems) > 0 {
		t.withProblems[nn] = true
		t.problemsOld = true
	}
	if len(e.checks) > 0 {
		t.withChecks[nn] = true
		t.checksOld = true
	}
}

func (t *Tracker) drop(nn types.NamespacedName) {
	if t.withProblems[nn] {
		delete(t.withProblems, nn)
		t.problemsOld = true
	}
	if t.withChecks[nn] {
		delete(t.withChecks, nn)
		t.checksOld = true
	}
	if e := t.entries[nn]; e != nil {
		t.backendEntries -= e.backendEntries
		if e.svc != nil {
			t.services--
		}
	}
	delete(t.entries, nn)
}

func (t *Tracker) unclaim(key FrontendKey, r claimRef) {
	refs := slices.DeleteFunc(t.claims[key], func(x claimRef) bool { return x == r })
	if len(refs) == 0 {
		delete(t.claims, key)
		return
	}
	t.claims[key] = refs
}

func (t *Tracker) offerOf(r claimRef) offer { return t.entries[r.svc].offers[r.idx] }

// resolve re-decides each key as claimAll does: the first offer in (kind
// rank, namespace/name, offer index) order wins and every other one is
// told why it lost; the winner's ScopeExternal twin, if any, follows it.
// Changes go to d when it is set.
func (t *Tracker) resolve(keys map[FrontendKey]bool, d *Delta) {
	for key := range keys {
		twinKey := key
		twinKey.Scope = ScopeExternal
		refs := t.claims[key]
		if len(refs) == 0 {
			t.set(key, nil, d)
			t.set(twinKey, nil, d)
			continue
		}
		if len(refs) > 1 {
			slices.SortFunc(refs, func(a, b claimRef) int {
				return cmp.Or(cmp.Compare(claimRank(t.offerOf(a).fe.Kind), claimRank(t.offerOf(b).fe.Kind)),
					compareNN(a.svc, b.svc), cmp.Compare(a.idx, b.idx))
			})
		}
		win := t.offerOf(refs[0])
		t.setLost(refs[0], nil)
		for _, r := range refs[1:] {
			if p, ok := lostClaim(win, t.offerOf(r)); ok {
				t.setLost(r, &p)
			} else {
				t.setLost(r, nil)
			}
		}
		if win.shadow {
			t.set(key, nil, d)
			t.set(twinKey, nil, d)
			continue
		}
		t.set(key, &win.fe, d)
		t.set(twinKey, win.twin, d)
	}
}

// set makes the state hold fe under key, or nothing when fe is nil, and
// records a change in d when it is set.
func (t *Tracker) set(key FrontendKey, fe *Frontend, d *Delta) {
	old, had := t.state[key]
	switch {
	case fe == nil && !had:
		return
	case fe == nil:
		t.count(old, -1)
		delete(t.state, key)
		if d != nil {
			d.Remove = append(d.Remove, key)
		}
		return
	case had && old.Equal(*fe):
		return
	case had:
		t.count(old, -1)
	}
	t.count(*fe, 1)
	t.state[key] = *fe
	if d != nil {
		d.Upsert[key] = *fe
	}
}

func (t *Tracker) setLost(r claimRef, p *model.Problem) {
	e := t.entries[r.svc]
	cur, had := e.lost[r.idx]
	switch {
	case p == nil && !had:
		return
	case p == nil:
		delete(e.lost, r.idx)
	case had && cur == *p:
		return
	default:
		if e.lost == nil {
			e.lost = map[int]model.Problem{}
		}
		e.lost[r.idx] = *p
	}
	t.problemsOld = true
	if len(e.problems) > 0 || len(e.lost) > 0 {
		t.withProblems[r.svc] = true
	} else {
		delete(t.withProblems, r.svc)
	}
}

func (t *Tracker) count(fe Frontend, sign int) {
	t.totals.Frontends += sign
	t.totals.Backends += sign * len(fe.Backends)
	t.totals.Ranges += sign * len(fe.SourceRanges)
	if !fe.PolicyDrop {
		return
	}
	policy := "external"
	if fe.Kind == KindClusterIP {
		policy = "internal"
	}
	m := t.totals.NoLocal[policy]
	if m == nil {
		m = map[types.NamespacedName]int{}
		t.totals.NoLocal[policy] = m
	}
	if m[fe.Service] += sign; m[fe.Service] <= 0 {
		delete(m, fe.Service)
	}
}

// groupSlices is indexSlices keeping the slices without a Service label,
// under their namespace and an empty name.
func groupSlices(in []*discoveryv1.EndpointSlice) map[types.NamespacedName][]*discoveryv1.EndpointSlice {
	sorted := slices.DeleteFunc(slices.Clone(in), func(s *discoveryv1.EndpointSlice) bool { return s == nil })
	slices.SortStableFunc(sorted, compareSlice)
	out := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for _, s := range sorted {
		if _, headless := s.Labels[corev1.IsHeadlessService]; headless {
			continue
		}
		nn := nnOf(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
		out[nn] = append(out[nn], s)
	}
	return out
}

func compareSlice(a, b *discoveryv1.EndpointSlice) int {
	return compareNN(nnOf(a.Namespace, a.Name), nnOf(b.Namespace, b.Name))
}

// withAddressReaders adds to changed, with their current objects, the
// Services whose frontends, problems or health checks read the node's
// addresses, for a change of those addresses alone.
func (t *Tracker) withAddressReaders(changed map[types.NamespacedName]ServiceObjects) map[types.NamespacedName]ServiceObjects {
	out := maps.Clone(changed)
	if out == nil {
		out = map[types.NamespacedName]ServiceObjects{}
	}
	for nn, e := range t.entries {
		if _, ok := out[nn]; !ok && readsNodeAddresses(e.svc) {
			out[nn] = ServiceObjects{Service: e.svc, Slices: e.slices}
		}
	}
	return out
}

// readsNodeAddresses: NodePorts are served on the node's addresses,
// externalIPs are captured only when they are one, health checks listen on
// them, and a source range holding the node's primary address lets the
// load-balancer IPs in (allowFromNode).
func readsNodeAddresses(svc *corev1.Service) bool {
	if svc == nil {
		return false
	}
	if len(svc.Spec.ExternalIPs) > 0 || svc.Spec.HealthCheckNodePort != 0 || len(svc.Spec.LoadBalancerSourceRanges) > 0 ||
		svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		return true
	}
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.NodePort != 0 })
}
