package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

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
		socklbbpf.SocklbMapSlots:    {Entries: 3, Capacity: 64},
		socklbbpf.SocklbMapAffinity: {Entries: affinity, Capacity: 16},
	} {
		if g := got[name]; g.Entries != want.Entries || g.Capacity != want.Capacity {
			t.Errorf("%s: %d of %d, want %d of %d", name, g.Entries, g.Capacity, want.Entries, want.Capacity)
		}
	}
	for _, name := range []string{socklbbpf.SocklbMapSkState, socklbbpf.SocklbMapSockEvents, socklbbpf.SocklbMapStats} {
		if u, ok := got[name]; ok {
			t.Errorf("%s reported (%d of %d): it cannot fill up", name, u.Entries, u.Capacity)
		}
	}
}

// TestMapUsageNeverWaitsForASync: a scrape reads map usage while a sync
// holds the datapath's lock (a full sync at 100k Services holds it for
// seconds) and gets the counts of the last write, members included,
// without walking them.
func TestMapUsageNeverWaitsForASync(t *testing.T) {
	d := openTest(t, Config{MaxServices: 64, MaxBackends: 32})
	web := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	web.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")}
	mustApply(t, d, state(web, frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.3:53")))
	d.mu.Lock()
	defer d.mu.Unlock()
	done := make(chan []MapUsage, 1)
	go func() {
		u, err := d.MapUsage()
		if err != nil {
			t.Error(err)
		}
		done <- u
	}()
	select {
	case usage := <-done:
		got := map[string]uint32{}
		for _, u := range usage {
			got[u.Name] = u.Entries
		}
		for name, want := range map[string]uint32{
			// Members of the UDP frontend only: nothing reads a TCP
			// ClusterIP's without sessionAffinity (needsMembers).
			socklbbpf.SocklbMapServices: 2, socklbbpf.SocklbMapMembers: 1, socklbbpf.SocklbMapBackends: 3,
			socklbbpf.SocklbMapSlots: 3, socklbbpf.SocklbMapSrcRanges: 2,
		} {
			if got[name] != want {
				t.Errorf("%s: %d entries, want %d", name, got[name], want)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("MapUsage waited 10 s for the lock a sync holds")
	}
}

// TestMapUsageMatchesTheMaps: the counts MapUsage keeps as it writes agree
// with a walk of each map after every step of a sequence of syncs: new
// frontends, changed backends and ranges, removals, a full Apply.
func TestMapUsageMatchesTheMaps(t *testing.T) {
	d := openTest(t, Config{MaxServices: 64, MaxBackends: 64})
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	b := frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.3:53")
	a2 := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.2:80", "10.244.1.4:80", "10.244.1.5:80")
	a2.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	c := frontend("10.96.0.30", 443, servicemap.TCP, "10.244.1.6:443")
	c.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")}
	steps := []struct {
		name  string
		apply func() ApplyResult
	}{
		{"two new frontends", func() ApplyResult { return d.Apply(state(a, b)) }},
		{"a's backends and ranges changed", func() ApplyResult { return d.ApplyDelta(servicemap.Delta{Upsert: state(a2)}) }},
		{"c added, b removed", func() ApplyResult {
			return d.ApplyDelta(servicemap.Delta{Upsert: state(c), Remove: []servicemap.FrontendKey{b.Key}})
		}},
		{"a full Apply back to a and b", func() ApplyResult { return d.Apply(state(a, b)) }},
		{"nothing", func() ApplyResult { return d.Apply(state()) }},
	}
	for _, s := range steps {
		if err := s.apply().Err(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		usage, err := d.MapUsage()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint32{}
		for _, u := range usage {
			got[u.Name] = u.Entries
		}
		for name, m := range map[string]*ebpf.Map{
			socklbbpf.SocklbMapServices: d.t.services, socklbbpf.SocklbMapSvcNames: d.t.svcNames,
			socklbbpf.SocklbMapSlots: d.t.slots, socklbbpf.SocklbMapMembers: d.t.members,
			socklbbpf.SocklbMapBackends: d.t.backends,
		} {
			walked, err := countEntries(m)
			if err != nil {
				t.Fatal(err)
			}
			if got[name] != walked {
				t.Errorf("%s: MapUsage says %d entries in %s, a walk finds %d", s.name, got[name], name, walked)
			}
		}
		var ranges uint32
		var k socklbbpf.SocklbSrcRangeKey
		var v uint8
		for it := d.t.srcRanges.Iterate(); it.Next(&k, &v); {
			ranges++
		}
		if got[socklbbpf.SocklbMapSrcRanges] != ranges {
			t.Errorf("%s: MapUsage says %d source ranges, a walk finds %d", s.name, got[socklbbpf.SocklbMapSrcRanges], ranges)
		}
	}
}
