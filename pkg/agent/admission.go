package agent

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/logkey"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Sized is a datapath whose maps have a fixed room; the agent then admits
// only the Services that fit (servicemap.Admit) instead of letting writes
// fail wherever a full map happens to be met.
type Sized interface {
	Capacity() servicemap.Capacity
}

// Grower is a Sized datapath whose maps can grow (datapath.Grow): asked
// for room for want, it grows as far as its budget allows and returns the
// capacity it has afterwards.
type Grower interface {
	Sized
	Grow(want servicemap.Capacity) (servicemap.Capacity, error)
}

// growRetry holds off another growth after one that failed for another
// reason than the budget: a growth loads and copies every map.
const growRetry = 30 * time.Second

// admissionMargin is the part of each map kept free of admitted Services:
// rewriting a frontend allocates its new backends before it frees the old
// ones, so a map filled to the last entry would fail the next change.
const admissionMargin = 32 // 1/32

// admission is what the last sync refused for lack of room.
type admission struct {
	services map[types.NamespacedName]servicemap.Demand
	keys     map[servicemap.FrontendKey]bool
	room     servicemap.Capacity // what admitted Services may use
	// denied is the last demand the budget refused a growth for: not
	// asked again until the demand exceeds it. retryAt holds off a growth
	// that failed otherwise (a migration under way, a failed load).
	denied  servicemap.Capacity
	retryAt time.Time
}

// admit decides which Services of r's state the maps take and rewrites r
// so that the datapath sees only those: a refused Service's frontends are
// left out of a full Apply, or removed and kept out of a delta; one
// admitted again is written whole. When the state fits (the common case)
// and nothing was refused before, it costs nothing per frontend.
//
// A refusal is policy, not a failure: the datapath never sees those
// frontends, so they never fail a sync, and /healthz stays healthy. One
// tenant filling the maps thus costs its own newest Services on every
// node, not every node's readiness. A write that fails for what was
// admitted still fails the sync, as kube-proxy's failed restores do.
func (a *Agent) admit(r *round) {
	sized, ok := a.cfg.Datapath.(Sized)
	if !ok {
		return
	}
	tot := a.tracker.Totals()
	need := servicemap.Capacity{Frontends: tot.Frontends, Backends: tot.BackendEntries, Slots: tot.Backends, Ranges: tot.Ranges}
	room := roomOf(sized.Capacity())
	if r.full {
		a.refused.denied = servicemap.Capacity{} // a growth refused is tried again hourly, at most
	}
	if !fits(need, room) {
		room = a.grow(need, room)
	}
	before := a.refused
	if len(before.keys) == 0 && fits(need, room) {
		return
	}
	now := admission{services: map[types.NamespacedName]servicemap.Demand{}, keys: map[servicemap.FrontendKey]bool{}, room: room, denied: before.denied, retryAt: before.retryAt}
	for _, d := range servicemap.Admit(a.tracker.Demands(), room) {
		now.services[d.Service] = d
	}
	if len(now.services) > 0 {
		for k, fe := range r.state {
			if _, ok := now.services[fe.Service]; ok {
				now.keys[k] = true
			}
		}
	}
	a.refused = now
	if r.delta == nil {
		if len(now.keys) > 0 {
			r.state = without(r.state, now.keys)
		}
		return
	}
	d := servicemap.Delta{Upsert: maps.Clone(r.delta.Upsert), Remove: r.delta.Remove}
	for k := range now.keys {
		delete(d.Upsert, k)
		if !before.keys[k] {
			d.Remove = append(d.Remove, k) // programmed until now, or never: removing is a no-op then
		}
	}
	for k := range before.keys {
		if fe, ok := r.state[k]; ok && !now.keys[k] {
			d.Upsert[k] = fe
		}
	}
	r.delta = &d
}

func roomOf(c servicemap.Capacity) servicemap.Capacity {
	return servicemap.Capacity{Frontends: c.Frontends - c.Frontends/admissionMargin, Backends: c.Backends - c.Backends/admissionMargin,
		Slots: c.Slots - c.Slots/admissionMargin, Ranges: c.Ranges - c.Ranges/admissionMargin}
}

func fits(need, room servicemap.Capacity) bool {
	return need.Frontends <= room.Frontends && need.Backends <= room.Backends && need.Slots <= room.Slots && need.Ranges <= room.Ranges
}

// grow asks a Grower datapath for maps with room for need (plus the
// margin) and returns the room it has then. A growth the budget refused is
// asked again only for a bigger demand.
func (a *Agent) grow(need, room servicemap.Capacity) servicemap.Capacity {
	g, ok := a.cfg.Datapath.(Grower)
	if !ok || a.refused.denied != (servicemap.Capacity{}) && fits(need, a.refused.denied) || time.Now().Before(a.refused.retryAt) {
		return room
	}
	want := servicemap.Capacity{Frontends: need.Frontends + need.Frontends/(admissionMargin-1) + 1,
		Backends: need.Backends + need.Backends/(admissionMargin-1) + 1, Slots: need.Slots + need.Slots/(admissionMargin-1) + 1,
		Ranges: need.Ranges + need.Ranges/(admissionMargin-1) + 1}
	start := time.Now()
	c, err := g.Grow(want)
	grown := roomOf(c)
	if grown != room {
		a.log.Info("the maps grew: the Services need more room", "frontends", c.Frontends, "backends", c.Backends, "source_ranges", c.Ranges,
			"needed_frontends", need.Frontends, "needed_backends", need.Backends, "needed_slots", need.Slots, "took", time.Since(start))
	}
	switch {
	case errors.Is(err, datapath.ErrBudget):
		a.refused.denied = need
		a.log.Warn("the maps cannot grow enough: the newest Services that do not fit are refused", "err", err)
	case err != nil:
		a.refused.retryAt = time.Now().Add(growRetry)
		a.log.Warn("the maps could not grow now: the newest Services that do not fit are refused meanwhile", "err", err, "retry_in", growRetry)
	}
	return grown
}

// without is state less the keys refused, for a full Apply.
func without(state servicemap.State, refused map[servicemap.FrontendKey]bool) servicemap.State {
	out := make(servicemap.State, len(state)-len(refused))
	for k, fe := range state {
		if !refused[k] {
			out[k] = fe
		}
	}
	return out
}

// reportRefusals logs, counts and records an Event for each Service newly
// refused, and logs each one taken again.
func (a *Agent) reportRefusals(before map[types.NamespacedName]servicemap.Demand) {
	for nn, d := range a.refused.services {
		if _, ok := before[nn]; ok {
			continue
		}
		msg := refusalNote(d, a.refused.room)
		a.log.Warn("Service not programmed: the maps have no room for it", logkey.Service(nn),
			"frontends", d.Frontends, "backends", d.Backends, "slots", d.Slots, "reason", msg)
		a.event(model.KindService, nn, "CapacityExceeded", "socklb on this node does not serve it: "+msg)
	}
	for nn := range before {
		if _, ok := a.refused.services[nn]; !ok {
			a.log.Info("Service programmed again: the maps have room for it", logkey.Service(nn))
		}
	}
	a.metrics.setRefused(a.refused.services)
}

func refusalNote(d servicemap.Demand, room servicemap.Capacity) string {
	return fmt.Sprintf("its %d frontends, %d backends, %d slots and %d source ranges do not fit beside the older Services (room for %d frontends, %d backends, %d slots and %d source ranges in all); "+
		"the newest Services are refused first, whole, and are served as soon as room frees up; raise --max-services (frontends, source ranges) or --max-backends (backends, slots), or remove Services",
		d.Frontends, d.Backends, d.Slots, d.Ranges, room.Frontends, room.Backends, room.Slots, room.Ranges)
}

// checks reports no local endpoint for the refused Services' health check
// node ports: this node does not serve them, so a load balancer must not
// send their traffic here.
func (ad admission) checks(in []servicemap.HealthCheck) []servicemap.HealthCheck {
	if len(ad.services) == 0 {
		return in
	}
	out := make([]servicemap.HealthCheck, len(in))
	for i, c := range in {
		if _, ok := ad.services[c.Service]; ok {
			c.LocalEndpoints = 0
		}
		out[i] = c
	}
	return out
}
