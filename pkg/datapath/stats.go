package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// ServiceStats returns the programmed frontends with their backends'
// counters, from the maps this process holds: no pin is opened. The
// frontends are copied under the sync's lock and the counters read after
// it, one lookup per backend, so a scrape costs the backends programmed
// and never holds a sync up for its syscalls.
func (d *Datapath) ServiceStats() ([]ServiceDump, error) {
	d.mu.Lock()
	out := make([]ServiceDump, 0, len(d.current))
	for _, s := range d.current {
		sd := ServiceDump{Frontend: s.Frontend, ID: s.ID, Generation: s.Generation, Broken: s.Broken}
		sd.Backends = make([]BackendDump, 0, len(s.BackendIDs))
		for i, id := range s.BackendIDs {
			sd.Backends = append(sd.Backends, BackendDump{ID: id, Backend: s.Frontend.Backends[i]})
		}
		out = append(out, sd)
	}
	d.mu.Unlock()

	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	var c socklbbpf.SocklbBackendStats
	for i := range out {
		for j := range out[i].Backends {
			b := &out[i].Backends[j]
			if err := d.t.stats.Lookup(b.ID, &c); err != nil {
				if !errors.Is(err, ebpf.ErrKeyNotExist) {
					return nil, fmt.Errorf("reading the counters of backend %d: %w", b.ID, err)
				}
				b.NoCounter = true
				continue
			}
			b.Connects, b.Datagrams = c.Connects, c.Datagrams
		}
	}
	return out, nil
}
