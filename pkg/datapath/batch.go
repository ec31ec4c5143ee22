package datapath

import (
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// The first sync of a large cluster writes every entry of every Service
// map: at 10 000 Services of 10 endpoints 420 000 entries, one syscall
// each on the per-entry path. BPF_MAP_UPDATE_BATCH writes a chunk of them
// per syscall. Only new frontends take this path: a changed one needs the
// generation switch of upsert, which one batch cannot order.
const (
	// batchMinFrontends: below it the saving is a few milliseconds, and
	// a small Apply keeps to the path every per-change sync takes.
	batchMinFrontends = 64
	// batchChunkFrontends bounds what one failure sends back to the
	// per-entry path, and the kernel's copy of one syscall's input
	// (a few hundred KiB per map at 10 backends per frontend).
	batchChunkFrontends = 1024
)

// batchWriter is the batch path's state on a Datapath.
type batchWriter struct {
	min, chunk int
	// refused holds the maps whose batch update the kernel refused as an
	// operation (no batch API, or a map type without it): they are
	// written per entry from then on.
	refused map[string]error
}

func newBatchWriter() batchWriter {
	return batchWriter{min: batchMinFrontends, chunk: batchChunkFrontends, refused: map[string]error{}}
}

// applyNew programs frontends absent from d.current, chunk by chunk. A
// chunk that fails anywhere is undone and programmed per entry, so the
// failures name their frontends and the map errors read as they do on the
// per-entry path.
func (d *Datapath) applyNew(fresh []servicemap.Frontend, res *ApplyResult) {
	// Sorted, ids come out the same whatever order the map of desired
	// frontends gave: a first fill is reproducible, and so are its tests.
	slices.SortFunc(fresh, func(a, b servicemap.Frontend) int { return compareKeys(a.Key, b.Key) })
	for len(fresh) > 0 {
		n := min(d.batch.chunk, len(fresh))
		chunk := fresh[:n]
		fresh = fresh[n:]
		err := d.writeChunk(chunk)
		if err == nil {
			res.Upserted += len(chunk)
			res.Batched += len(chunk)
			continue
		}
		if res.BatchFallback == nil {
			res.BatchFallback = err
		}
		for _, fe := range chunk {
			d.applyUpsert(fe.Key, fe, res)
		}
	}
}

// writeChunk programs chunk with batch writes or not at all: on error,
// everything it wrote and allocated is undone.
func (d *Datapath) writeChunk(chunk []servicemap.Frontend) (err error) {
	f := newFill()
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	next := make([]*Service, 0, len(chunk))
	for _, fe := range chunk {
		s, u, err := d.stage(fe, f)
		undo = append(undo, u...)
		if err != nil {
			return err
		}
		next = append(next, s)
	}
	// Source ranges per entry (an LPM trie takes no batch), before the
	// service entries that point at them.
	for _, s := range next {
		undo = append(undo, func() { d.dropRanges(s.ID, s.Frontend.SourceRanges, nil) })
		if err := d.addRanges(s.ID, nil, s.Frontend.SourceRanges); err != nil {
			return err
		}
	}
	byName := f.tables()
	maps := mapFields(&d.t)
	for _, def := range fillOrder() {
		tb, m := byName[def.name], *maps[def.name]
		undo = append(undo, func() { tb.deleteAll(m) })
		if err := d.writeTable(def.name, tb, m); err != nil {
			return err
		}
	}
	for _, s := range next {
		d.setCurrent(s)
	}
	return nil
}

// stage allocates fe's ids and adds its entries to f, in upsert's order
// of allocation, so both paths give a frontend the same ids.
func (d *Datapath) stage(fe servicemap.Frontend, f *fill) (*Service, []func(), error) {
	var undo []func()
	id, err := d.svcIDs.alloc()
	if err != nil {
		return nil, undo, err
	}
	undo = append(undo, func() { d.svcIDs.free(id) })
	aid, err := d.refGroup(fe)
	if err != nil {
		return nil, undo, err
	}
	undo = append(undo, func() { d.unrefGroup(fe) })
	s := &Service{Frontend: fe, ID: id, Generation: 1, AffinityID: aid}
	for _, b := range fe.Backends {
		k := backendKeyOf(aid, fe.Key.Proto, b)
		bid, fresh, err := d.backends.acquire(k)
		if err != nil {
			return nil, undo, err
		}
		// Only the count: the chunk's undo deletes what it wrote.
		undo = append(undo, func() { d.backends.release(k, bid) })
		if fresh {
			f.stats.add(bid, socklbbpf.SocklbBackendStats{})
			f.backends.add(bid, k.value(bid))
		}
		if needsMembers(fe) {
			f.members.add(memberKey(id, b), bid)
		}
		s.BackendIDs = append(s.BackendIDs, bid)
	}
	for _, t := range d.sockTargets(fe) {
		d.ref(t)
		undo = append(undo, func() { d.unref(t) })
	}
	for slot, bid := range s.BackendIDs {
		f.slots.add(socklbbpf.SocklbSlotKey{SvcId: id, Generation: 1, Slot: uint32(slot)},
			socklbbpf.SocklbSlotValue{BackendId: bid, SvcId: id, Generation: 1})
	}
	f.names.add(id, nameValue(fe))
	f.services.add(svcKey(fe.Key), svcValue(s))
	return s, undo, nil
}

// writeTable writes one map's entries of a chunk: batched, or per entry
// when the kernel refuses batches for that map.
func (d *Datapath) writeTable(name string, tb table, m *ebpf.Map) error {
	if tb.len() == 0 {
		return nil
	}
	if _, ok := d.batch.refused[name]; !ok {
		n, err := tb.writeBatch(m)
		if err == nil {
			return nil
		}
		if n > 0 || !batchRefused(err) {
			return mapErr(name, err)
		}
		d.batch.refused[name] = err
	}
	if err := tb.writeEach(m); err != nil {
		return mapErr(name, err)
	}
	return nil
}

// enotsupp is the kernel's internal ENOTSUPP (524), which leaks to user
// space from BPF commands a map type does not implement.
const enotsupp = unix.Errno(524)

// batchRefused tells a kernel or map type without batch updates from a
// batch that failed on an entry.
func batchRefused(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL) || errors.Is(err, enotsupp) || errors.Is(err, unix.EOPNOTSUPP)
}

// fillOrder is the maps Apply fills, in the order a reader's pointers
// require: what a services entry leads to exists before it.
func fillOrder() []mapDef {
	var out []mapDef
	for _, def := range mapTable {
		if def.fromAPI && !def.perEntry {
			out = append(out, def)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].fill < out[j].fill })
	return out
}

func compareKeys(a, b servicemap.FrontendKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Proto) - int(b.Proto)
}

// nameValue is the svc_names entry: the name cut to the C array, which
// keeps a terminating zero.
func nameValue(fe servicemap.Frontend) socklbbpf.SocklbSvcName {
	var name socklbbpf.SocklbSvcName
	for i, c := range []byte(svcName(fe)) {
		if i == len(name.Name)-1 {
			break
		}
		name.Name[i] = int8(c)
	}
	return name
}

func svcValue(s *Service) socklbbpf.SocklbSvcValue {
	fe := s.Frontend
	sv := socklbbpf.SocklbSvcValue{
		SvcId:           s.ID,
		Count:           uint32(len(s.BackendIDs)),
		Generation:      s.Generation,
		AffinityTimeout: uint32(fe.Affinity / time.Second),
		AffinityId:      s.AffinityID,
		Kind:            kindToMap(fe.Kind),
	}
	if fe.PolicyDrop {
		sv.Flags |= socklbbpf.SocklbSvcFlagSVC_F_POLICY_DROP
	}
	if fe.LocalOnly {
		sv.Flags |= socklbbpf.SocklbSvcFlagSVC_F_LOCAL
	}
	if len(fe.SourceRanges) > 0 {
		sv.Flags |= socklbbpf.SocklbSvcFlagSVC_F_SRC_RANGES
	}
	if fe.LocalNodeOnly {
		sv.Flags |= socklbbpf.SocklbSvcFlagSVC_F_LOCAL_NODE_ONLY
	}
	return sv
}

// fill is one chunk's entries, per map.
type fill struct {
	services entries[socklbbpf.SocklbSvcKey, socklbbpf.SocklbSvcValue]
	names    entries[uint32, socklbbpf.SocklbSvcName]
	slots    entries[socklbbpf.SocklbSlotKey, socklbbpf.SocklbSlotValue]
	backends entries[uint32, socklbbpf.SocklbBackend]
	stats    entries[uint32, socklbbpf.SocklbBackendStats]
	members  entries[socklbbpf.SocklbMemberKey, uint32]
}

func newFill() *fill { return &fill{} }

// tables names f's entries by map, as mapTable does.
func (f *fill) tables() map[string]table {
	return map[string]table{
		socklbbpf.SocklbMapServices: &f.services,
		socklbbpf.SocklbMapSvcNames: &f.names,
		socklbbpf.SocklbMapSlots:    &f.slots,
		socklbbpf.SocklbMapBackends: &f.backends,
		socklbbpf.SocklbMapStats:    &f.stats,
		socklbbpf.SocklbMapMembers:  &f.members,
	}
}

type table interface {
	len() int
	writeBatch(m batchUpdater) (int, error)
	writeEach(m *ebpf.Map) error
	deleteAll(m *ebpf.Map)
}

// batchUpdater is the one method of *ebpf.Map that writeBatch uses: a
// test stands in for the kernel's partial writes with it.
type batchUpdater interface {
	BatchUpdate(keys, values any, opts *ebpf.BatchOptions) (int, error)
}

// entries are one map's keys and values.
type entries[K, V any] struct {
	keys []K
	vals []V
}

func (e *entries[K, V]) add(k K, v V) {
	e.keys = append(e.keys, k)
	e.vals = append(e.vals, v)
}

func (e *entries[K, V]) len() int { return len(e.keys) }

// writeBatch writes the entries with BatchUpdate, resuming after the
// entries the kernel took when it ran out of memory for an element: as for
// put, ENOMEM from maps that are not preallocated is the allocator's
// caches draining under a burst, not a full map,
// and a chunk that gave up on it would be written per entry instead.
func (e *entries[K, V]) writeBatch(m batchUpdater) (int, error) {
	done := 0
	backoff := 100 * time.Microsecond
	for i := 0; ; i++ {
		n, err := m.BatchUpdate(e.keys[done:], e.vals[done:], nil)
		done += n
		if err == nil || !errors.Is(err, unix.ENOMEM) || i == 8 {
			return done, err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

func (e *entries[K, V]) writeEach(m *ebpf.Map) error {
	for i := range e.keys {
		if err := put(func() error { return m.Put(e.keys[i], e.vals[i]) }); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll undoes a chunk's writes to m, partial ones included: keys it
// never wrote are simply not there.
func (e *entries[K, V]) deleteAll(m *ebpf.Map) {
	for i := range e.keys {
		_ = m.Delete(e.keys[i])
	}
}
