package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// ApplyResult says what one Apply changed.
type ApplyResult struct {
	Upserted int // frontends written (new or changed)
	Removed  int
	// Batched counts the Upserted written with batch map updates (new
	// frontends of a large Apply: the first sync above all).
	Batched int
	// BatchFallback is why the first chunk that could not be batched was
	// written per entry instead (nil: none): the per-entry path is slower,
	// and the log should say why it ran.
	BatchFallback error
	// Failed maps each frontend that could not be programmed to why. Such
	// a frontend keeps what it had before (or stays absent); the next
	// Apply tries again.
	Failed map[servicemap.FrontendKey]error
	// SocketsDestroyed counts sockets destroyed because their backend left;
	// SocketErr says what went wrong doing so (the maps are still right).
	SocketsDestroyed int
	SocketErr        error
	// SocketScan is what finding those sockets took, when an endpoint
	// left and some walk ran.
	SocketScan SocketScan
	// HookErr says why the egress hook stayed attached with no frontend
	// needing it (egress.go); the next Apply tries again.
	HookErr error
	// Switched says what the pending migration did when this Apply let
	// the links switch to the new maps (the live sockets' state carried),
	// or is empty.
	Switched string
}

// Err joins the failures into one error, sorted for stable logs.
func (r ApplyResult) Err() error {
	keys := make([]servicemap.FrontendKey, 0, len(r.Failed))
	for k := range r.Failed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	errs := make([]error, 0, len(keys))
	for _, k := range keys {
		errs = append(errs, r.Failed[k])
	}
	return errors.Join(errs...)
}

// Apply makes the maps hold exactly want, touching only frontends that
// differ from what is programmed. Each frontend is switched atomically:
// readers see its old backend set or its new one, never a mix. It walks
// every frontend: the agent uses it for full syncs, ApplyDelta otherwise.
func (d *Datapath) Apply(want servicemap.State) ApplyResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retryStaleDevices()
	res := ApplyResult{Failed: map[servicemap.FrontendKey]error{}}
	ranged := hasRanges(want)
	d.prepareEgress(ranged)
	// Removals first: they free ids and map room the upserts may need.
	for key := range d.current {
		if _, ok := want[key]; !ok {
			d.applyRemove(key, &res)
		}
	}
	var fresh []servicemap.Frontend
	for key, fe := range want {
		if _, ok := d.current[key]; !ok {
			if !d.egressRefused(fe, &res) {
				fresh = append(fresh, fe)
			}
			continue
		}
		d.applyUpsert(key, fe, &res)
	}
	if len(fresh) >= d.batch.min {
		d.applyNew(fresh, &res)
	} else {
		for _, fe := range fresh {
			d.applyUpsert(fe.Key, fe, &res)
		}
	}
	res.SocketsDestroyed, res.SocketScan, res.SocketErr = d.terminateRetired()
	res.Switched = d.finishAfterApply(res)
	res.HookErr = d.settleEgress(ranged)
	d.publishUsage()
	return res
}

// ApplyDelta writes the frontends of delta and removes its keys, as Apply
// would for a state differing from the programmed one by just that: the
// cost is the change, whatever the number of frontends programmed.
func (d *Datapath) ApplyDelta(delta servicemap.Delta) ApplyResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retryStaleDevices()
	res := ApplyResult{Failed: map[servicemap.FrontendKey]error{}}
	ranged := hasRanges(delta.Upsert)
	d.prepareEgress(ranged)
	for _, key := range delta.Remove {
		if _, ok := delta.Upsert[key]; !ok {
			d.applyRemove(key, &res)
		}
	}
	for key, fe := range delta.Upsert {
		d.applyUpsert(key, fe, &res)
	}
	res.SocketsDestroyed, res.SocketScan, res.SocketErr = d.terminateRetired()
	res.Switched = d.finishAfterDelta(delta, res)
	res.HookErr = d.settleEgress(ranged)
	d.publishUsage()
	return res
}

func (d *Datapath) applyRemove(key servicemap.FrontendKey, res *ApplyResult) {
	cur, ok := d.current[key]
	if !ok {
		return
	}
	if err := d.remove(cur); err != nil {
		res.Failed[key] = fmt.Errorf("removing %s (%s): %w", key, svcName(cur.Frontend), err)
		return
	}
	res.Removed++
}

func (d *Datapath) applyUpsert(key servicemap.FrontendKey, fe servicemap.Frontend, res *ApplyResult) {
	if cur, ok := d.current[key]; ok && !cur.Broken && cur.Frontend.Equal(fe) {
		return
	}
	if d.egressRefused(fe, res) {
		return
	}
	if err := d.upsert(fe); err != nil {
		res.Failed[key] = fmt.Errorf("programming %s (Service %s, port %q): %w", key, fe.Service, fe.PortName, err)
		return
	}
	res.Upserted++
}

// terminateRetired destroys the sockets connected to endpoints that left a
// frontend and that no frontend keeps any more, as a backend or lingering
// (a pod can back a ClusterIP and a NodePort: leaving one keeps its
// sockets). refs counts the uses, so this costs the retired endpoints, not
// every backend of the node.
func (d *Datapath) terminateRetired() (int, SocketScan, error) {
	retired := d.retired
	d.retired = nil
	if d.term == nil || len(retired) == 0 {
		return 0, SocketScan{}, nil
	}
	var targets []socklbbpf.SocktermSockTarget
	seen := map[socklbbpf.SocktermSockTarget]bool{}
	for _, t := range retired {
		if d.refs[t] == 0 && !seen[t] {
			targets = append(targets, t)
			seen[t] = true
		}
	}
	return d.term.destroy(targets)
}

// ref and unref count the frontends that keep an endpoint's sockets.
func (d *Datapath) ref(t socklbbpf.SocktermSockTarget) { d.refs[t]++ }

func (d *Datapath) unref(t socklbbpf.SocktermSockTarget) {
	if d.refs[t]--; d.refs[t] <= 0 {
		delete(d.refs, t)
	}
}

func sockTarget(proto servicemap.Protocol, b servicemap.Backend) socklbbpf.SocktermSockTarget {
	return socklbbpf.SocktermSockTarget{Addr: addrBytes(b.Addr), Port: portToMap(b.Port), Proto: uint8(proto)}
}

// upsert writes fe's new generation beside the live one, flips the service
// entry to it with one map update, then deletes what only the old
// generation used. On failure it undoes its own writes, so the live
// generation is untouched.
func (d *Datapath) upsert(fe servicemap.Frontend) error {
	old := d.current[fe.Key]
	var undo []func()
	rollback := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}

	next := &Service{Frontend: fe, Generation: 1}
	if old != nil {
		next.ID = old.ID
		next.Generation = old.Generation + 1
	} else {
		id, err := d.svcIDs.alloc()
		if err != nil {
			return &MapError{Map: socklbbpf.SocklbMapServices, Err: fmt.Errorf("services map is full (%s): raise --max-services", err)}
		}
		next.ID = id
		undo = append(undo, func() { d.svcIDs.free(id) })
	}
	aid, err := d.refGroup(fe)
	if err != nil {
		rollback()
		return fmt.Errorf("affinity ids are exhausted (%s): raise --max-services", err)
	}
	next.AffinityID = aid
	undo = append(undo, func() { d.unrefGroup(fe) })
	// A frontend moved to another Service port (its name changed under
	// the same address) takes that port's entries.
	oldIDs := map[servicemap.Backend]uint32{}
	if old != nil && old.AffinityID == aid {
		for i, b := range old.Frontend.Backends {
			oldIDs[b] = old.BackendIDs[i]
		}
	}

	// Backends first: a slot must never point at a missing backend.
	for _, b := range fe.Backends {
		if id, ok := oldIDs[b]; ok {
			next.BackendIDs = append(next.BackendIDs, id)
			continue
		}
		k := backendKeyOf(aid, fe.Key.Proto, b)
		id, err := d.useBackend(k)
		if err != nil {
			rollback()
			return err
		}
		undo = append(undo, func() { d.dropBackend(k, id) })
		next.BackendIDs = append(next.BackendIDs, id)
	}
	// Members of the new backends; of all of them when the frontend
	// starts needing members (sessionAffinity turned on).
	if needsMembers(fe) {
		gained := old == nil || !needsMembers(old.Frontend)
		for i, b := range fe.Backends {
			if _, kept := oldIDs[b]; kept && !gained {
				continue
			}
			mk, id := memberKey(next.ID, b), next.BackendIDs[i]
			if err := put(func() error { return d.t.members.Put(mk, id) }); err != nil {
				rollback()
				return mapErr(socklbbpf.SocklbMapMembers, err)
			}
			undo = append(undo, func() { _ = d.t.members.Delete(mk) })
		}
	}
	for slot, id := range next.BackendIDs {
		sk := socklbbpf.SocklbSlotKey{SvcId: next.ID, Generation: next.Generation, Slot: uint32(slot)}
		sv := socklbbpf.SocklbSlotValue{BackendId: id, SvcId: next.ID, Generation: next.Generation}
		if err := put(func() error { return d.t.slots.Put(sk, sv) }); err != nil {
			rollback()
			return mapErr(socklbbpf.SocklbMapSlots, err)
		}
		undo = append(undo, func() { _ = d.t.slots.Delete(sk) })
	}
	if old == nil || svcName(old.Frontend) != svcName(fe) {
		name := nameValue(fe)
		if err := put(func() error { return d.t.svcNames.Put(next.ID, name) }); err != nil {
			rollback()
			return mapErr(socklbbpf.SocklbMapSvcNames, err)
		}
	}

	var hadRanges []netip.Prefix
	if old != nil {
		hadRanges = old.Frontend.SourceRanges
	}
	if err := d.addRanges(next.ID, hadRanges, fe.SourceRanges); err != nil {
		rollback()
		d.dropRanges(next.ID, fe.SourceRanges, hadRanges)
		return err
	}

	// The flip: from here on readers use the new generation.
	sv := svcValue(next)
	if err := put(func() error { return d.t.services.Put(svcKey(fe.Key), sv) }); err != nil {
		rollback()
		d.dropRanges(next.ID, fe.SourceRanges, hadRanges)
		return mapErr(socklbbpf.SocklbMapServices, err)
	}
	d.setCurrent(next)
	d.dropRanges(next.ID, hadRanges, fe.SourceRanges)

	var had servicemap.Frontend
	if old != nil {
		had = old.Frontend
		d.unrefGroup(old.Frontend)
		d.retire(old, next)
	}
	d.retarget(had, fe)
	return nil
}

// retire deletes the old generation's slots and the backends only it used.
// A reader still holding the old generation retries against the new one.
func (d *Datapath) retire(old, next *Service) {
	for slot := range old.BackendIDs {
		_ = d.t.slots.Delete(socklbbpf.SocklbSlotKey{SvcId: old.ID, Generation: old.Generation, Slot: uint32(slot)})
	}
	// Backend entries go by id (a renamed Service port takes another
	// port's ids for the same endpoints); members by endpoint, as they are
	// keyed, so a renamed port's new members stay.
	kept := map[uint32]bool{}
	for _, id := range next.BackendIDs {
		kept[id] = true
	}
	stays := map[servicemap.Backend]bool{}
	for _, b := range next.Frontend.Backends {
		stays[b] = true
	}
	// A frontend that no longer needs members (sessionAffinity turned
	// off) drops them all, now that no reader of the new generation
	// looks for them.
	dropAll := needsMembers(old.Frontend) && !needsMembers(next.Frontend)
	for i, id := range old.BackendIDs {
		if !stays[old.Frontend.Backends[i]] || dropAll {
			_ = d.t.members.Delete(memberKey(old.ID, old.Frontend.Backends[i]))
		}
		if !kept[id] {
			d.dropBackend(backendKeyOf(old.AffinityID, old.Frontend.Key.Proto, old.Frontend.Backends[i]), id)
		}
	}
}

func (d *Datapath) remove(cur *Service) error {
	if err := d.t.services.Delete(svcKey(cur.Frontend.Key)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting service entry: %w", err)
	}
	d.dropCurrent(cur.Frontend.Key)
	d.dropRanges(cur.ID, cur.Frontend.SourceRanges, nil)
	d.retire(cur, &Service{})
	d.retarget(cur.Frontend, servicemap.Frontend{})
	d.unrefGroup(cur.Frontend)
	_ = d.t.svcNames.Delete(cur.ID)
	d.svcIDs.free(cur.ID)
	return nil
}

// useBackend returns the id of k's backends entry for one more frontend,
// writing the entry if no frontend had it yet.
func (d *Datapath) useBackend(k backendKey) (uint32, error) {
	id, fresh, err := d.backends.acquire(k)
	if err != nil {
		return 0, &MapError{Map: socklbbpf.SocklbMapBackends, Err: fmt.Errorf("backends map is full (%s): raise --max-backends", err)}
	}
	if !fresh {
		return id, nil
	}
	// The id's counters start from zero before the backend exists, so
	// the last owner's counts are not its.
	if err := put(func() error { return d.t.stats.Put(id, socklbbpf.SocklbBackendStats{}) }); err != nil {
		d.backends.release(k, id)
		return 0, mapErr(socklbbpf.SocklbMapStats, err)
	}
	if err := put(func() error { return d.t.backends.Put(id, k.value(id)) }); err != nil {
		d.backends.release(k, id)
		return 0, mapErr(socklbbpf.SocklbMapBackends, err)
	}
	return id, nil
}

// dropBackend is one frontend fewer using k's entry, deleted with its
// last: a slot still pointing at it is gone by then (retire deletes the
// old generation's slots first).
func (d *Datapath) dropBackend(k backendKey, id uint32) {
	if d.backends.release(k, id) {
		_ = d.t.backends.Delete(id)
	}
}

// needsMembers says whether anything reads fe's members: sessionAffinity
// (lb_sticky, sockets and packets), an unconnected UDP socket reusing its
// backend (lb_sock_backend), the per-packet path's flows (still_member:
// every frontend but a ClusterIP's, which packets never reach). A TCP
// ClusterIP without sessionAffinity, most frontends of a cluster, needs
// none: at 100 000 single-port Services of 10 endpoints that is a million
// entries fewer to write and hold.
func needsMembers(fe servicemap.Frontend) bool {
	return fe.Affinity > 0 || fe.Key.Proto == servicemap.UDP || fe.Kind != servicemap.KindClusterIP
}

func memberKey(svcID uint32, b servicemap.Backend) socklbbpf.SocklbMemberKey {
	return socklbbpf.SocklbMemberKey{SvcId: svcID, Addr: addrBytes(b.Addr), Port: portToMap(b.Port)}
}

func svcKey(k servicemap.FrontendKey) socklbbpf.SocklbSvcKey {
	return socklbbpf.SocklbSvcKey{Addr: addrBytes(k.Addr), Port: portToMap(k.Port), Proto: uint8(k.Proto), Scope: socklbbpf.SocklbSvcScope(k.Scope)}
}

// mapErr names the map and the flag that sizes it when the kernel says the
// map is full (hash maps answer E2BIG); other errors (ENOMEM that outlasted
// put's retries) are retried by the next sync.
func mapErr(m string, err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return &MapError{Map: m, Err: fmt.Errorf("writing %s map: %w", m, err)}
	}
	if def, _ := mapDefOf(m); isFull(err) {
		return &MapError{Map: m, Err: fmt.Errorf("%s map is full: raise %s (nothing already programmed was changed)", m, def.flag)}
	}
	return &MapError{Map: m, Err: fmt.Errorf("writing %s map: %w", m, err)}
}
