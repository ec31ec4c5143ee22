package datapath

import (
	"net/netip"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestLingeringEndpointsKeepTheirSockets: an endpoint that leaves a
// frontend's backends but still serves (Lingering) keeps its sockets, as
// kube-proxy keeps its flows; once it stops serving it is retired with no
// frontend keeping it, which is what destroys its sockets. Checked on the
// first sync's batch path and on updates alike.
func TestLingeringEndpointsKeepTheirSockets(t *testing.T) {
	d := openTest(t, Config{})
	a := servicemap.Backend{Addr: netip.MustParseAddr("10.0.0.1"), Port: 8080}
	target := sockTarget(servicemap.UDP, a)
	kept := func(what string, want bool) {
		t.Helper()
		d.mu.Lock()
		defer d.mu.Unlock()
		if got := d.refs[target] > 0; got != want {
			t.Errorf("%s: sockets on %s kept %v, want %v", what, a, got, want)
		}
	}
	lingering := func(fe servicemap.Frontend) servicemap.Frontend {
		fe.Lingering = []servicemap.Backend{a}
		return fe
	}

	mustApply(t, d, state(lingering(frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.2:8080"))))
	kept("first sync, 10.0.0.1 terminating and still serving", true)

	mustApply(t, d, state(frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.1:8080", "10.0.0.2:8080")))
	kept("10.0.0.1 a backend again", true)
	mustApply(t, d, state(lingering(frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.2:8080"))))
	kept("10.0.0.1 left the backends, still serving", true)

	mustApply(t, d, state(frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.2:8080")))
	kept("10.0.0.1 stopped serving", false)

	mustApply(t, d, state(lingering(frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.2:8080"))))
	mustApply(t, d, state())
	kept("the Service removed", false)
}

// TestUsesCountedOnlyForTerminatedProtocols: the datapath counts the
// frontends keeping an endpoint's sockets only for the protocols the
// configured termination destroys (under the default, UDP: no entry per
// TCP endpoint), on the first sync, on updates and after a restart's
// adoption alike.
func TestUsesCountedOnlyForTerminatedProtocols(t *testing.T) {
	tcp := frontend("10.96.0.10", 80, servicemap.TCP, "10.0.0.1:8080", "10.0.0.2:8080")
	udp := frontend("10.96.0.10", 53, servicemap.UDP, "10.0.0.1:5353")
	for _, tc := range []struct {
		mode     SocketTermination
		tcp, udp bool
	}{
		{TerminateNone, false, false},
		{"", false, true}, // the default: udp
		{TerminateUDP, false, true},
		{TerminateAll, true, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			counted := func(d *Datapath, what string) {
				t.Helper()
				d.mu.Lock()
				defer d.mu.Unlock()
				want := 0
				if tc.tcp {
					want += 2
				}
				if tc.udp {
					want++
				}
				if len(d.refs) != want {
					t.Errorf("%s: %d endpoints counted (%v), want %d", what, len(d.refs), d.refs, want)
				}
			}
			cfg := Config{TerminateSockets: tc.mode, BPFFSPath: pinDir(t)}
			d := openTest(t, cfg)
			mustApply(t, d, state(tcp, udp))
			counted(d, "first sync")
			mustApply(t, d, state())
			if n := len(d.refs); n != 0 {
				t.Errorf("all Services removed: %d endpoints still counted", n)
			}
			mustApply(t, d, state(tcp, udp))
			counted(d, "added again")
			d.Close()
			counted(openTest(t, cfg), "adopted after a restart")
		})
	}
}
