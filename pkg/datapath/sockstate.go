package datapath

import "fmt"

// SocketStateEvents count what befell per-socket state (sk_state, in
// socket-local storage) since the maps were created.
type SocketStateEvents struct {
	// Evicted: a socket sent to more Service ports than its state holds
	// (4), so the oldest entry was overwritten: replies from that port's
	// backend then show the pod address, and socket termination no longer
	// finds the socket for it.
	Evicted uint64
	// NoState: the kernel could not allocate a socket's storage (memory);
	// the socket was translated but nothing about it was kept.
	NoState uint64
}

// sock_events indexes, SOCK_EV_* in bpf/c/maps.h.
const (
	sockEvEvicted = 0
	sockEvNoState = 1
)

// SocketStateEvents sums the per-CPU sock_events counters.
func (d *Datapath) SocketStateEvents() (SocketStateEvents, error) {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	var ev SocketStateEvents
	for idx, dst := range map[uint32]*uint64{sockEvEvicted: &ev.Evicted, sockEvNoState: &ev.NoState} {
		var per []uint64
		if err := d.objs.SockEvents.Lookup(idx, &per); err != nil {
			return SocketStateEvents{}, fmt.Errorf("reading sock_events[%d]: %w", idx, err)
		}
		for _, n := range per {
			*dst += n
		}
	}
	return ev, nil
}
