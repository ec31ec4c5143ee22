package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestInspectShowsAMissingCounter: a backend without a stats entry is not
// counted by the hooks, so inspect must not print "connects 0" for it
// (that read as "no traffic" in the real-node report) but say why.
func TestInspectShowsAMissingCounter(t *testing.T) {
	be := func(s string) servicemap.Backend {
		ap := netip.MustParseAddrPort(s)
		return servicemap.Backend{Addr: ap.Addr(), Port: ap.Port()}
	}
	svcs := []datapath.ServiceDump{{
		Frontend: servicemap.Frontend{Key: servicemap.FrontendKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Proto: servicemap.TCP}},
		Backends: []datapath.BackendDump{
			{ID: 1, Backend: be("10.244.1.1:9376"), Connects: 58},
			{ID: 2, Backend: be("10.244.1.2:9376"), NoCounter: true},
		},
	}}
	var out strings.Builder
	if err := printChain(&out, svcs); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, "10.244.1.1:9376") && !strings.Contains(l, "connects 58"):
			t.Errorf("counted backend: %q, want connects 58", l)
		case strings.Contains(l, "10.244.1.2:9376") && (strings.Contains(l, "connects 0") || !strings.Contains(l, "no stats entry")):
			t.Errorf("backend without a counter: %q, want it to say it has no stats entry, not connects 0", l)
		}
	}
}
