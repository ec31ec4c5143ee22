package datapath

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// batchSize is how many entries one BPF_MAP_LOOKUP_BATCH call copies: a
// hash map refuses (ENOSPC) a batch smaller than one of its buckets, which
// this exceeds by far.
const batchSize = 4096

// ServiceStats returns the programmed frontends with their backends'
// counters, from the maps this process holds: no pin is opened, and the
// per-CPU stats map is read with batch lookups, a few syscalls for the
// whole map instead of one per backend.
func (d *Datapath) ServiceStats() ([]ServiceDump, error) {
	counters, err := readStats(d.t.stats)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ServiceDump, 0, len(d.current))
	for _, s := range d.current {
		sd := ServiceDump{Frontend: s.Frontend, ID: s.ID, Generation: s.Generation, Broken: s.Broken}
		sd.Backends = make([]BackendDump, 0, len(s.BackendIDs))
		for i, id := range s.BackendIDs {
			c, ok := counters[id]
			sd.Backends = append(sd.Backends, BackendDump{ID: id, Backend: s.Frontend.Backends[i], Connects: c.Connects, Datagrams: c.Datagrams, NoCounter: !ok})
		}
		out = append(out, sd)
	}
	return out, nil
}

// restoreCounters gives every live backend that lacks one a zeroed stats
// entry: the hooks count only into an existing entry (lb_count), so a
// backend left without one would show 0 connects for as long as it lives.
// An existing entry is never overwritten.
func (d *Datapath) restoreCounters(live map[uint32]bool) error {
	zero := make([]socklbbpf.SocklbBackendStats, ebpf.MustPossibleCPU())
	var errs []error
	for id := range live {
		err := put(func() error { return d.t.stats.Update(id, zero, ebpf.UpdateNoExist) })
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			errs = append(errs, fmt.Errorf("re-creating the stats entry of backend %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// readStats sums each backend's per-CPU counters.
func readStats(m *ebpf.Map) (map[uint32]socklbbpf.SocklbBackendStats, error) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	out := map[uint32]socklbbpf.SocklbBackendStats{}
	keys := make([]uint32, batchSize)
	vals := make([]socklbbpf.SocklbBackendStats, batchSize*ncpu)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			var sum socklbbpf.SocklbBackendStats
			for _, v := range vals[i*ncpu : (i+1)*ncpu] {
				sum.Connects += v.Connects
				sum.Datagrams += v.Datagrams
			}
			out[keys[i]] = sum
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the stats map: %w", err)
		}
	}
}

// MapUsage is how full one map is.
type MapUsage struct {
	Name              string
	Entries, Capacity uint32
}

// MapUsage reports the entries and capacity of every map that can fill up.
// The maps the agent writes are counted from its own record of them
// (exact, and free at any size); the others (the affinity LRU the hooks
// fill, members) are counted with batch lookups. Arrays and socket-local
// storage cannot fill up and are left out.
func (d *Datapath) MapUsage() ([]MapUsage, error) {
	d.mu.Lock()
	counted := map[string]uint32{}
	backends := map[uint32]bool{}
	var slots uint32
	for _, s := range d.current {
		slots += uint32(len(s.BackendIDs))
		for _, id := range s.BackendIDs {
			backends[id] = true
		}
	}
	counted[socklbbpf.SocklbMapServices] = uint32(len(d.current))
	counted[socklbbpf.SocklbMapSvcNames] = uint32(len(d.current))
	counted[socklbbpf.SocklbMapSlots] = slots
	counted[socklbbpf.SocklbMapBackends] = uint32(len(backends))
	counted[socklbbpf.SocklbMapStats] = uint32(len(backends))
	// Counted by the last sweep: a scrape never walks a million flows.
	counted[socklbbpf.SocklbMapFlows] = uint32(d.flowCount.Load())
	d.mu.Unlock()

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
