package datapath

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// usageCounts is what MapUsage reports of the maps the agent writes, as
// one write left them: published whole under d.mu, read without it.
type usageCounts struct {
	frontends, slots, members, backends, ranges uint32
}

// setCurrent records s as programmed, keeping the counts usage publishes
// and the frontends with source ranges (egress.go) without a walk.
func (d *Datapath) setCurrent(s *Service) {
	if old, ok := d.current[s.Frontend.Key]; ok {
		d.uncount(old)
	}
	d.count(s, 1)
	d.current[s.Frontend.Key] = s
}

func (d *Datapath) dropCurrent(key servicemap.FrontendKey) {
	if old, ok := d.current[key]; ok {
		d.uncount(old)
	}
	delete(d.current, key)
}

func (d *Datapath) uncount(s *Service) { d.count(s, -1) }

func (d *Datapath) count(s *Service, sign int) {
	d.slotCount += sign * len(s.BackendIDs)
	if needsMembers(s.Frontend) {
		d.memberCount += sign * len(s.BackendIDs)
	}
	d.rangeCount += sign * len(s.Frontend.SourceRanges)
	if len(s.Frontend.SourceRanges) > 0 {
		d.ranged += sign
	}
}

// publishUsage makes the counts of the write just done visible to MapUsage.
// Called with d.mu held.
func (d *Datapath) publishUsage() {
	d.usage.Store(&usageCounts{
		frontends: uint32(len(d.current)),
		slots:     uint32(d.slotCount),
		members:   uint32(d.memberCount),
		backends:  uint32(d.backends.len()),
		ranges:    uint32(d.rangeCount),
	})
}

// MapUsage is how full one map is.
type MapUsage struct {
	Name              string
	Entries, Capacity uint32
}

// batchSize is how many entries one BPF_MAP_LOOKUP_BATCH call copies: a
// hash map refuses (ENOSPC) a batch smaller than one of its buckets, which
// this exceeds by far.
const batchSize = 4096

// MapUsage reports the entries and capacity of every map that can fill up.
// The maps the agent writes are counted from its own record of them, as
// the last write published it (exact, and free at any size); the others,
// which the programs fill and which --max-affinity and the C code bound
// far below the service maps (the affinity LRU, node addresses), are
// counted with batch lookups. It never takes the lock a
// sync holds, so a scrape never delays one. Arrays and socket-local
// storage cannot fill up and are left out.
func (d *Datapath) MapUsage() ([]MapUsage, error) {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	u := d.usage.Load()
	counted := map[string]uint32{
		socklbbpf.SocklbMapServices:  u.frontends,
		socklbbpf.SocklbMapSvcNames:  u.frontends,
		socklbbpf.SocklbMapSlots:     u.slots,
		socklbbpf.SocklbMapMembers:   u.members,
		socklbbpf.SocklbMapBackends:  u.backends,
		socklbbpf.SocklbMapSrcRanges: u.ranges,
		// Counted by the last sweep: a scrape never walks a million flows.
		socklbbpf.SocklbMapFlows: uint32(d.flowCount.Load()),
	}

	var out []MapUsage
	var errs []error
	for name, m := range stateMaps(&d.objs.SocklbMaps) {
		switch {
		case m.MaxEntries() == 0:
			continue // socket-local storage: sized by the sockets, never full
		case m.Type() == ebpf.Array || m.Type() == ebpf.PerCPUArray:
			continue // every slot always exists: counters, not room
		}
		u := MapUsage{Name: name, Capacity: m.MaxEntries()}
		if n, ok := counted[name]; ok {
			u.Entries = n
		} else if n, err := countEntries(m); err != nil {
			errs = append(errs, fmt.Errorf("counting the %s map: %w", name, err))
			continue
		} else {
			u.Entries = n
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// countEntries walks a hash map in batches, whatever its key and value
// types: they are read as byte arrays of the map's sizes.
func countEntries(m *ebpf.Map) (uint32, error) {
	vsize := int(m.ValueSize())
	switch m.Type() {
	case ebpf.PerCPUHash, ebpf.LRUCPUHash, ebpf.PerCPUArray:
		ncpu, err := ebpf.PossibleCPU()
		if err != nil {
			return 0, err
		}
		vsize = (vsize + 7) / 8 * 8 * ncpu
	}
	keys := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(int(m.KeySize()), reflect.TypeOf(byte(0)))), batchSize, batchSize).Interface()
	vals := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(vsize, reflect.TypeOf(byte(0)))), batchSize, batchSize).Interface()
	var cursor ebpf.MapBatchCursor
	var total uint32
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		total += uint32(n)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return total, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// Capacity is the room of the maps every frontend, every backend and every
// source range of one takes an entry of, as the maps were created.
func (d *Datapath) Capacity() servicemap.Capacity {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	return d.capacity()
}
