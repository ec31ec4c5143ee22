package agent

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// DeltaApplier is a datapath that can apply a change without walking
// every frontend; the agent uses it when it has one.
type DeltaApplier interface {
	ApplyDelta(servicemap.Delta) datapath.ApplyResult
}

// round is what one sync read and computed.
type round struct {
	full     bool
	state    servicemap.State  // the whole desired state (the Tracker's; read only)
	delta    *servicemap.Delta // what changed; nil: apply state as a whole
	problems []model.Problem
	checks   []servicemap.HealthCheck
	node     *corev1.Node
	triggers map[types.NamespacedName][]time.Time
	received map[types.NamespacedName]time.Time // Changes.Received
	changes  changeCount
	// addrsChanged: this node's interface addresses differ from the last
	// sync's (an address event, or one seen with an API change).
	addrsChanged bool
}

// read computes this sync's desired state. With a Tracked source and no
// full sync asked for, it recomputes only the Services the events touched;
// a change of the node facts, the first sync and the periodic resync
// rebuild everything from a snapshot. What the agent keeps of the other
// Nodes is computed again with every rebuild, and otherwise only when
// they changed: their addresses (externalIPs this node may capture), and
// where they serve NodePorts, also when this node's interface addresses
// changed (this node's own are left out of those).
func (a *Agent) read(full bool) round {
	t, tracked := a.src.(source.Tracked)
	if !tracked {
		return a.readSnapshot()
	}
	ch := t.Checkout()
	r := round{changes: changeCount{services: ch.ServiceObjects, slices: ch.SliceObjects}, triggers: a.sinceStart(ch.Triggers), received: ch.Received}
	if !full && !ch.Node {
		// NodeInput holds this Node alone. Every Node is listed, once
		// for both uses, only when the other Nodes changed (their
		// addresses are made again here) or, below, when this node's
		// own addresses did.
		nodes := sync.OnceValue(t.Nodes)
		node := a.withPeers(a.withNodeFacts(t.NodeInput()), nodes, ch.RemoteNodes)
		r.addrsChanged = a.noteAddresses(node)
		objs := make(map[types.NamespacedName]servicemap.ServiceObjects, len(ch.Services))
		for nn := range ch.Services {
			objs[nn] = t.ServiceObjects(nn)
		}
		if d, problems, ok := a.tracker.Update(node, objs); ok {
			// Where the others serve NodePorts is computed again when
			// they changed, or when this node's addresses (which they
			// must not claim) did.
			a.refreshRemoteNodes(node, nodes, ch.RemoteNodes)
			r.state, r.delta, r.problems = a.tracker.State(), &d, a.withRemoteProblems(problems)
			r.checks, r.node = a.tracker.HealthChecks(), node.ThisNode()
			return r
		}
	}
	in := a.withNodeFacts(t.Snapshot())
	in = a.withPeers(in, listed(in.Nodes), true)
	r.addrsChanged = a.noteAddresses(in) || r.addrsChanged
	r.full = true
	r.state, r.problems = a.tracker.Full(in)
	a.refreshRemoteNodes(in, listed(in.Nodes), true)
	r.problems = a.withRemoteProblems(r.problems)
	r.checks, r.node = a.tracker.HealthChecks(), in.ThisNode()
	return r
}

// readSnapshot serves sources that cannot say what changed (a manifests
// directory): every sync compares snapshots and rebuilds.
func (a *Agent) readSnapshot() round {
	a.snapMu.Lock()
	in := a.withNodeFacts(a.src.Snapshot())
	cur := versionsOf(in)
	r := round{full: true, changes: countChanges(a.seen, cur), triggers: triggerTimes(in, a.seen, a.started), addrsChanged: a.noteAddresses(in)}
	a.seen = cur
	a.snapMu.Unlock()
	in = a.withPeers(in, listed(in.Nodes), true)
	r.state, r.problems = a.tracker.Full(in)
	a.refreshRemoteNodes(in, listed(in.Nodes), true)
	r.problems = a.withRemoteProblems(r.problems)
	r.checks, r.node = a.tracker.HealthChecks(), in.ThisNode()
	return r
}

// noteAddresses reports whether in's interface addresses differ from the
// last sync's, and remembers them.
func (a *Agent) noteAddresses(in model.Input) bool {
	changed := !slices.Equal(in.LocalAddresses, a.lastAddrs)
	a.lastAddrs = in.LocalAddresses
	return changed
}

// sinceStart drops trigger times from before the agent started: they
// measure the agent's start, not the network.
func (a *Agent) sinceStart(in map[types.NamespacedName][]time.Time) map[types.NamespacedName][]time.Time {
	out := make(map[types.NamespacedName][]time.Time, len(in))
	for svc, ts := range in {
		for _, t := range ts {
			if t.After(a.started) {
				out[svc] = append(out[svc], t)
			}
		}
	}
	return out
}

// apply writes the round to the datapath: its delta, plus the frontends
// the last sync failed to program, when the datapath takes deltas.
func (a *Agent) apply(r round) datapath.ApplyResult {
	da, ok := a.cfg.Datapath.(DeltaApplier)
	if !ok || r.delta == nil {
		if r.delta != nil && len(a.refused.keys) > 0 {
			return a.cfg.Datapath.Apply(without(r.state, a.refused.keys))
		}
		return a.cfg.Datapath.Apply(r.state)
	}
	d := *r.delta
	for k := range a.lastFailed {
		if a.refused.keys[k] {
			// Refused after its write or removal failed: it must go.
			d.Remove = append(d.Remove, k)
			continue
		}
		if _, ok := d.Upsert[k]; ok {
			continue
		}
		if fe, ok := r.state[k]; ok {
			d.Upsert[k] = fe
		} else {
			d.Remove = append(d.Remove, k)
		}
	}
	return da.ApplyDelta(d)
}
