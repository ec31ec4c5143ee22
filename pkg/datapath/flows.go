package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// FlowTimeouts are how long a flow of the per-packet path lives without a
// packet, as conntrack's: a flow that is not expired keeps its backend.
type FlowTimeouts struct {
	TCPSyn, TCPEstablished, TCPClosing time.Duration
	UDP, UDPStream                     time.Duration
}

// DefaultFlowTimeouts are nf_conntrack's defaults as kube-proxy leaves
// them (it raises the established one to 24 h): an unanswered SYN 2 min, a
// FIN or RST 10 s, UDP 30 s, or 2 min once answered.
var DefaultFlowTimeouts = FlowTimeouts{
	TCPSyn:         120 * time.Second,
	TCPEstablished: 24 * time.Hour,
	TCPClosing:     10 * time.Second,
	UDP:            30 * time.Second,
	UDPStream:      120 * time.Second,
}

func (ft FlowTimeouts) of(v *socklbbpf.SocklbFlowValue, proto uint8) time.Duration {
	if proto == protoTCP {
		switch {
		case v.Flags&socklbbpf.SocklbFlowFlagFLOW_F_CLOSING != 0:
			return ft.TCPClosing
		case v.Flags&socklbbpf.SocklbFlowFlagFLOW_F_REPLIED != 0:
			return ft.TCPEstablished
		}
		return ft.TCPSyn
	}
	if v.Flags&socklbbpf.SocklbFlowFlagFLOW_F_REPLIED != 0 {
		return ft.UDPStream
	}
	return ft.UDP
}

const protoTCP = 6

// flowConstants are the load-time names of the timeouts in bpf/c/flow.h.
func (ft FlowTimeouts) constants() map[string]uint64 {
	return map[string]uint64{
		"flow_tcp_syn_ns":         uint64(ft.TCPSyn),
		"flow_tcp_established_ns": uint64(ft.TCPEstablished),
		"flow_tcp_closing_ns":     uint64(ft.TCPClosing),
		"flow_udp_ns":             uint64(ft.UDP),
		"flow_udp_stream_ns":      uint64(ft.UDPStream),
	}
}

// FlowStats is what one sweep of the flows map found.
type FlowStats struct {
	Flows    int // live flows (each two entries)
	Expired  int // flows removed because their time ran out
	Orphans  int // reply entries whose flow was gone (a race at creation)
	Capacity int // flows the map holds at most (--max-flows)
}

// ExpireFlows removes the flows whose time ran out, as conntrack's garbage
// collector does: the programs treat an expired flow as gone already, but
// its two entries hold room a new flow needs, since a full map drops new
// flows instead of evicting live ones.
func (d *Datapath) ExpireFlows() (FlowStats, error) {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	st := FlowStats{Capacity: int(d.cfg.MaxFlows)}
	now, err := monotonicNow()
	if err != nil {
		return st, err
	}
	// An entry is dropped only if it is still the one seen here: the
	// programs start new flows all the while, and a client reusing its
	// port gets the same keys back, which must not go with the old flow.
	type seen struct {
		k       socklbbpf.SocklbFlowKey
		created uint64
	}
	var (
		k     socklbbpf.SocklbFlowKey
		v     socklbbpf.SocklbFlowValue
		drop  []seen
		reply = map[socklbbpf.SocklbFlowKey]uint64{}
		live  = map[socklbbpf.SocklbFlowKey]bool{} // reply keys of flows kept, or already dropped
	)
	it := d.t.flows.Iterate()
	for it.Next(&k, &v) {
		if v.Dir == socklbbpf.SocklbFlowDirFLOW_REPLY {
			reply[k] = v.Created
			continue
		}
		rk := replyKey(k, v)
		if age := now - time.Duration(v.LastSeen); age > d.cfg.FlowTimeouts.of(&v, k.Proto) {
			drop = append(drop, seen{k, v.Created}, seen{rk, v.Created})
			live[rk] = true
			st.Expired++
			continue
		}
		live[rk] = true
		st.Flows++
	}
	if err := it.Err(); err != nil {
		return st, fmt.Errorf("reading the flows map: %w", err)
	}
	for rk, created := range reply {
		// A reply entry whose flow the walk did not see: the flow may be
		// new (the walk missed it) or being created (its reply entry is
		// written first), so it is an orphan only if, now, its flow is
		// still gone and it is old enough not to be mid-creation.
		if live[rk] || now-time.Duration(created) < orphanGrace {
			continue
		}
		if err := d.t.flows.Lookup(rk, &v); err != nil {
			continue
		}
		var o socklbbpf.SocklbFlowValue
		if err := d.t.flows.Lookup(origKey(rk, v), &o); err == nil && o.Dir == socklbbpf.SocklbFlowDirFLOW_ORIG {
			continue
		}
		drop = append(drop, seen{rk, created})
		st.Orphans++
	}
	var errs []error
	for _, e := range drop {
		// Both entries of a flow carry its creation time (flow_create).
		if err := d.t.flows.Lookup(e.k, &v); err != nil || v.Created != e.created {
			continue
		}
		if err := d.t.flows.Delete(e.k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	d.flowCount.Store(int64(2 * st.Flows))
	if len(errs) > 0 {
		return st, fmt.Errorf("removing expired flows: %w", errors.Join(errs...))
	}
	return st, nil
}

// orphanGrace is how old a reply entry without its flow must be before a
// sweep removes it: flow_create writes the reply entry, then the flow's.
const orphanGrace = time.Second

// origKey is the key of the ORIG entry of the REPLY entry k -> v
// (flow_orig_key in bpf/c/flow.h).
func origKey(k socklbbpf.SocklbFlowKey, v socklbbpf.SocklbFlowValue) socklbbpf.SocklbFlowKey {
	return socklbbpf.SocklbFlowKey{Saddr: v.Addr, Daddr: v.NatAddr, Sport: v.Port, Dport: v.NatPort, Proto: k.Proto}
}

// replyKey is the key of the REPLY entry of the ORIG entry k -> v
// (flow_reply_key in bpf/c/flow.h).
func replyKey(k socklbbpf.SocklbFlowKey, v socklbbpf.SocklbFlowValue) socklbbpf.SocklbFlowKey {
	return socklbbpf.SocklbFlowKey{Saddr: v.Addr, Daddr: v.NatAddr, Sport: v.Port, Dport: v.NatPort, Proto: k.Proto}
}

// monotonicNow is bpf_ktime_get_ns's clock.
func monotonicNow() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// FlowEvents sums the per-CPU flow_events counters: flows created, and why
// packets from other machines were dropped.
func (d *Datapath) FlowEvents() (map[socklbbpf.SocklbFlowEvent]uint64, error) {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	out := map[socklbbpf.SocklbFlowEvent]uint64{}
	for ev := socklbbpf.SocklbFlowEvent(0); ev < socklbbpf.SocklbFlowEventFLOW_EV_MAX; ev++ {
		var per []uint64
		if err := d.t.flowEvents.Lookup(uint32(ev), &per); err != nil {
			return nil, fmt.Errorf("reading flow_events[%d]: %w", ev, err)
		}
		for _, n := range per {
			out[ev] += n
		}
	}
	return out, nil
}
