package datapath

import (
	"net/netip"
	"testing"
	"time"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestServiceStatsFromHeldMaps: ServiceStats reads the counters through
// the maps the Datapath holds (batch lookups), and agrees with Dump, which
// opens the pins; it keeps working when the stats pin is gone, so it never
// re-opens one.
func TestServiceStatsFromHeldMaps(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	p := testProgs(t, d)
	web := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	dns := frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.3:53")
	mustApply(t, d, state(web, dns))
	for i := range 7 {
		run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, uint64(100+i))
	}
	want, err := Dump(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.t.stats.Unpin(); err != nil {
		t.Fatal(err)
	}
	got, err := d.ServiceStats()
	if err != nil {
		t.Fatalf("ServiceStats with the stats pin gone: %v", err)
	}
	connects := func(ds []ServiceDump) map[servicemap.FrontendKey]uint64 {
		out := map[servicemap.FrontendKey]uint64{}
		for _, s := range ds {
			out[s.Frontend.Key] += 0 // present even without connects
			for _, b := range s.Backends {
				out[s.Frontend.Key] += b.Connects
			}
		}
		return out
	}
	g, w := connects(got), connects(want)
	if len(g) != 2 || g[web.Key] != 7 || g[dns.Key] != 0 {
		t.Errorf("ServiceStats connects %v, want 7 on %s and 0 on %s", g, web.Key, dns.Key)
	}
	if len(w) != len(g) || w[web.Key] != g[web.Key] || w[dns.Key] != g[dns.Key] {
		t.Errorf("ServiceStats %v disagrees with Dump %v", g, w)
	}
}

// TestMapUsage: entries and capacity per map, from the agent's record for
// the maps it writes and from a batch count for the others; arrays and
// socket-local storage, which cannot fill up, are left out.
func TestMapUsage(t *testing.T) {
	d := openTest(t, Config{MaxServices: 64, MaxBackends: 32, MaxAffinity: 16})
	p := testProgs(t, d)
	aff := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	aff.Affinity = time.Hour
	mustApply(t, d, state(aff, frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.3:53")))
	for i := range 5 {
		runFrom(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, uint64(200+i), uint64(300+i))
	}
	usage, err := d.MapUsage()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]MapUsage{}
	for _, u := range usage {
		got[u.Name] = u
	}
	affinity := uint32(countKeys[socklbbpf.SocklbAffinityKey](t, d.t.affinity))
	if affinity == 0 {
		t.Fatal("the connects with sessionAffinity left no affinity entry to count")
	}
	for name, want := range map[string]MapUsage{
		socklbbpf.SocklbMapServices: {Entries: 2, Capacity: 64},
		socklbbpf.SocklbMapSvcNames: {Entries: 2, Capacity: 64},
		socklbbpf.SocklbMapBackends: {Entries: 3, Capacity: 32},
		socklbbpf.SocklbMapStats:    {Entries: 3, Capacity: 32},
		socklbbpf.SocklbMapSlots:    {Entries: 3, Capacity: 64},
		socklbbpf.SocklbMapAffinity: {Entries: affinity, Capacity: 16},
	} {
		if g := got[name]; g.Entries != want.Entries || g.Capacity != want.Capacity {
			t.Errorf("%s: %d of %d, want %d of %d", name, g.Entries, g.Capacity, want.Entries, want.Capacity)
		}
	}
	for _, name := range []string{socklbbpf.SocklbMapSkState, socklbbpf.SocklbMapSockEvents} {
		if u, ok := got[name]; ok {
			t.Errorf("%s reported (%d of %d): it cannot fill up", name, u.Entries, u.Capacity)
		}
	}
}
