package datapath

import (
	"slices"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// sockTargets is the endpoints whose sockets fe keeps: its backends, and
// the serving endpoints it no longer offers (Lingering), which kube-proxy
// would leave their flows to. None when the terminator never destroys
// sockets of fe's protocol: counting them would cost an entry per TCP
// endpoint (a million at 100 000 Services) under the default, UDP only.
func (d *Datapath) sockTargets(fe servicemap.Frontend) []socklbbpf.SocktermSockTarget {
	if !d.terminates(fe.Key.Proto) {
		return nil
	}
	out := make([]socklbbpf.SocktermSockTarget, 0, len(fe.Backends)+len(fe.Lingering))
	for _, b := range fe.Backends {
		out = append(out, sockTarget(fe.Key.Proto, b))
	}
	for _, b := range fe.Lingering {
		out = append(out, sockTarget(fe.Key.Proto, b))
	}
	return out
}

// terminates says whether the configured termination destroys sockets of
// proto. It reads the configuration, not the terminator: adopt counts the
// uses before Open creates the terminator.
func (d *Datapath) terminates(proto servicemap.Protocol) bool {
	switch d.cfg.TerminateSockets {
	case TerminateNone:
		return false
	case TerminateAll:
		return proto == servicemap.UDP || proto == servicemap.TCP
	default:
		return proto == servicemap.UDP
	}
}

// retarget moves a frontend's hold on sockets from had to next (a zero
// Frontend for none). An endpoint next no longer keeps is retired; its
// sockets go once no frontend keeps it (terminateRetired).
func (d *Datapath) retarget(had, next servicemap.Frontend) {
	before, after := d.sockTargets(had), d.sockTargets(next)
	if slices.Equal(before, after) { // most updates: endpoints kept, a weight or flag changed
		return
	}
	in := func(ts []socklbbpf.SocktermSockTarget) map[socklbbpf.SocktermSockTarget]bool {
		m := make(map[socklbbpf.SocktermSockTarget]bool, len(ts))
		for _, t := range ts {
			m[t] = true
		}
		return m
	}
	wasIn, isIn := in(before), in(after)
	for _, t := range after {
		if !wasIn[t] {
			d.ref(t)
		}
	}
	for _, t := range before {
		if !isIn[t] {
			d.unref(t)
			d.retired = append(d.retired, t)
		}
	}
}
