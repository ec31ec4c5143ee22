package datapath

import (
	"errors"
	"fmt"

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
	d.objsMu.RLock()
	counters, err := readStats(d.t.stats)
	d.objsMu.RUnlock()
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
