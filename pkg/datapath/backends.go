package datapath

import (
	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Backends are shared by the frontends of a Service port: the backends
// map holds one entry per endpoint address, port and protocol of each
// Service port (and family), whatever the number of its frontends (the
// ClusterIP, a NodePort, externalIPs, LoadBalancer IPs). That is
// kube-proxy's KUBE-SEP chain, one per Service port and endpoint, which
// every frontend's KUBE-SVC chain jumps to. Slots and members stay per
// frontend: they are what differs between frontends (a traffic policy
// gives a NodePort fewer endpoints than its ClusterIP). Before, each
// frontend had its own copy of every endpoint, so a Service port with a
// NodePort took its endpoints twice over.
//
// Cilium shares a backend across Services too; socklb does not, so that a
// counter (stats, indexed by the id) stays the Service port's, as a
// KUBE-SEP's packet counter is: two Services selecting one pod count apart.

// backendKey names a backends map entry by what it holds.
type backendKey struct {
	group uint32 // the Service port's affinity id (affinity.go)
	addr  [16]uint8
	port  uint16 // network order, as in the map
	proto uint8
}

func backendKeyOf(group uint32, proto servicemap.Protocol, b servicemap.Backend) backendKey {
	return backendKey{group: group, addr: addrBytes(b.Addr), port: portToMap(b.Port), proto: uint8(proto)}
}

func (k backendKey) value(id uint32) socklbbpf.SocklbBackend {
	return socklbbpf.SocklbBackend{Addr: k.addr, Port: k.port, Proto: k.proto, Id: id}
}

// backendUse is a shared entry's id and the frontends using it.
type backendUse struct {
	id   uint32
	uses uint32
}

// backendTable is the record of the backends map: which id each endpoint
// has and how many frontends use it. It only counts; its callers write
// and delete the entries.
type backendTable struct {
	ids   *idAllocator
	byKey map[backendKey]backendUse
	// extra counts the uses of ids whose key byKey gives another id:
	// maps written by an agent from before backends were shared hold one
	// id per frontend, and each such id lives until its last frontend is
	// rewritten, which then takes the shared one.
	extra map[uint32]uint32
}

func newBackendTable(max uint32) *backendTable {
	return &backendTable{ids: newIDAllocator(max), byKey: map[backendKey]backendUse{}, extra: map[uint32]uint32{}}
}

// acquire returns k's id, counting one more use; fresh says the id is
// new, and its entry (and zeroed counters) must be written.
func (t *backendTable) acquire(k backendKey) (id uint32, fresh bool, err error) {
	if u, ok := t.byKey[k]; ok {
		u.uses++
		t.byKey[k] = u
		return u.id, false, nil
	}
	id, err = t.ids.alloc()
	if err != nil {
		return 0, false, err
	}
	t.byKey[k] = backendUse{id: id, uses: 1}
	return id, true, nil
}

// release counts one use of id (k's) fewer; freed says it was the last,
// the id is free again and its entry is to be deleted.
func (t *backendTable) release(k backendKey, id uint32) (freed bool) {
	if u, ok := t.byKey[k]; ok && u.id == id {
		if u.uses--; u.uses > 0 {
			t.byKey[k] = u
			return false
		}
		delete(t.byKey, k)
		t.ids.free(id)
		return true
	}
	n, ok := t.extra[id]
	if !ok {
		return false
	}
	if n > 1 {
		t.extra[id] = n - 1
		return false
	}
	delete(t.extra, id)
	t.ids.free(id)
	return true
}

// adopt counts a use of id (k's) read back from the maps.
func (t *backendTable) adopt(k backendKey, id uint32) {
	u, ok := t.byKey[k]
	switch {
	case !ok:
		t.ids.reserve(id)
		t.byKey[k] = backendUse{id: id, uses: 1}
	case u.id == id:
		u.uses++
		t.byKey[k] = u
	default:
		t.ids.reserve(id)
		t.extra[id]++
	}
}

// len is the entries the backends map holds.
func (t *backendTable) len() int { return len(t.ids.used) }
