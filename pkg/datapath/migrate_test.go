package datapath

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

func loadedSpec(t *testing.T, cfg Config) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := socklbbpf.LoadSocklb()
	if err != nil {
		t.Fatal(err)
	}
	applySizes(spec.Maps, cfg.withDefaults())
	return spec
}

func mustVersion(t *testing.T, spec *ebpf.CollectionSpec) string {
	t.Helper()
	v, err := layoutVersion(spec.Maps)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLayoutVersionFollowsBTFAndSizes: the pin directory's name changes
// with any map's capacity and with any change to a key or value type, also
// one that keeps every size (a renamed field), so nobody has to remember
// to bump a version when bpf/c/maps.h changes.
func TestLayoutVersionFollowsBTFAndSizes(t *testing.T) {
	base := mustVersion(t, loadedSpec(t, Config{}))
	if again := mustVersion(t, loadedSpec(t, Config{})); again != base {
		t.Fatalf("the same object gives two versions: %s, %s", base, again)
	}
	if !generationName.MatchString(base) {
		t.Fatalf("version %q does not match %v, so Cleanup and PinnedMapsDir would not find it", base, generationName)
	}
	renamed := loadedSpec(t, Config{})
	v := btf.Copy(renamed.Maps[socklbbpf.SocklbMapServices].Value).(*btf.Struct)
	for i := range v.Members {
		if v.Members[i].Name == "pad" {
			v.Members[i].Name = "spare"
		}
	}
	renamed.Maps[socklbbpf.SocklbMapServices].Value = v
	resized := loadedSpec(t, Config{MaxAffinity: 1234})
	testLayout := loadedSpec(t, Config{})
	testLayoutChange = "1"
	applyTestLayoutChange(testLayout.Maps)
	testLayoutChange = ""
	for name, spec := range map[string]*ebpf.CollectionSpec{
		"svc_value.pad renamed (same size)": renamed,
		"--max-affinity changed":            resized,
		"the test-only layout change":       testLayout,
	} {
		if got := mustVersion(t, spec); got == base {
			t.Errorf("%s: version stays %s", name, base)
		}
	}

	old, _ := specLayout(loadedSpec(t, Config{}).Maps[socklbbpf.SocklbMapServices])
	ren, _ := specLayout(renamed.Maps[socklbbpf.SocklbMapServices])
	if ren.sameShape(old) {
		t.Errorf("a renamed field counts as the same shape, so its entries would be copied under another meaning")
	}
	oldAff, _ := specLayout(loadedSpec(t, Config{}).Maps[socklbbpf.SocklbMapAffinity])
	newAff, _ := specLayout(resized.Maps[socklbbpf.SocklbMapAffinity])
	if !newAff.sameShape(oldAff) || newAff == oldAff {
		t.Errorf("a resized affinity map should be the same shape with another size:\n%v\n%v", oldAff, newAff)
	}
}

// TestPinnedMapsMatchTheirSpec: what the kernel reports of a pinned map
// (its BTF included) compares equal to the spec it was made from;
// otherwise every restart would rebuild the maps and lose the sockets'
// storage.
func TestPinnedMapsMatchTheirSpec(t *testing.T) {
	d := openTest(t, Config{})
	spec := loadedSpec(t, d.cfg)
	for name, m := range stateMaps(d.Maps()) {
		want, err := specLayout(spec.Maps[name])
		if err != nil {
			t.Fatal(err)
		}
		if got := pinnedLayout(m); got != want {
			t.Errorf("map %s:\npinned %v\nspec   %v", name, got, want)
		}
	}
}

func mapID(t *testing.T, m *ebpf.Map) ebpf.MapID {
	t.Helper()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

// onlyGeneration checks that exactly one generation is pinned, d's.
func onlyGeneration(t *testing.T, d *Datapath) {
	t.Helper()
	gens, err := generations(d.cfg.BPFFSPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 1 || gens[0].dir != d.pinDir {
		t.Fatalf("pinned generations %+v, want only %s", gens, d.pinDir)
	}
	for name := range stateMaps(d.Maps()) {
		if _, err := os.Stat(filepath.Join(d.pinDir, name)); err != nil {
			t.Errorf("map %s not pinned in %s: %v", name, d.pinDir, err)
		}
	}
}

// TestSizeChangeMigrates: restarting with other --max-* sizes moves every
// map to a new generation with its entries (frontends, affinity) and keeps
// the socket storage map itself, then drops the old generation; and back.
func TestSizeChangeMigrates(t *testing.T) {
	dir := pinDir(t)
	small := Config{BPFFSPath: dir, MaxServices: 64, MaxBackends: 256, MaxAffinity: 128}
	big := Config{BPFFSPath: dir, MaxServices: 128, MaxBackends: 512, MaxAffinity: 256}
	d := openTest(t, small)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	mustApply(t, d, state(a, frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.3:53")))
	want := d.Programmed()
	aff := netnsClient(42, 7)
	if err := d.t.affinity.Put(aff, socklbbpf.SocklbAffinityValue{LastUsed: 99}); err != nil {
		t.Fatal(err)
	}
	skState := mapID(t, d.Maps().SkState)
	oldDir := d.pinDir
	d.Close()

	for _, step := range []struct {
		name string
		cfg  Config
	}{{"upgrade", big}, {"rollback", small}} {
		d := openTest(t, step.cfg)
		if d.pinDir == oldDir {
			t.Fatalf("%s: the same generation %s for other sizes", step.name, d.pinDir)
		}
		onlyGeneration(t, d)
		if got := d.Maps().Services.MaxEntries(); got != step.cfg.MaxServices {
			t.Errorf("%s: services holds %d entries, want %d", step.name, got, step.cfg.MaxServices)
		}
		if got := d.Programmed(); !maps.EqualFunc(got, want, func(a, b Service) bool { return a.Frontend.Equal(b.Frontend) && a.ID == b.ID }) {
			t.Errorf("%s: frontends %v, want %v", step.name, got, want)
		}
		var v socklbbpf.SocklbAffinityValue
		if err := d.t.affinity.Lookup(aff, &v); err != nil || v.LastUsed != 99 {
			t.Errorf("%s: affinity entry not copied: %v %+v", step.name, err, v)
		}
		if id := mapID(t, d.Maps().SkState); id != skState {
			t.Errorf("%s: sk_state is map %d, was %d: live sockets lost their state", step.name, id, skState)
		}
		p := testProgs(t, d)
		if r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.20:53"), servicemap.UDP, 1); r.addrPort.String() != "10.244.1.3:53" {
			t.Errorf("%s: 10.96.0.20:53 translated to %v", step.name, r.addrPort)
		}
		oldDir = d.pinDir
		d.Close()
	}
}

// TestShrinkBelowContentKeepsServing: new sizes too small for what the
// maps hold fail Open naming the flag, and leave the old generation the
// only one, whole.
func TestShrinkBelowContentKeepsServing(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir, MaxServices: 8})
	mustApply(t, d, state(
		frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80"),
		frontend("10.96.0.11", 80, servicemap.TCP, "10.244.1.1:80"),
		frontend("10.96.0.12", 80, servicemap.TCP, "10.244.1.1:80"),
	))
	oldDir := d.pinDir
	d.Close()
	d2, err := Open(Config{BPFFSPath: dir, MaxServices: 2})
	if err == nil {
		d2.Close()
		t.Fatal("Open put 3 frontends into a services map of 2")
	}
	for _, w := range []string{"--max-services", oldDir} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	d = openTest(t, Config{BPFFSPath: dir, MaxServices: 8})
	onlyGeneration(t, d)
	if d.pinDir != oldDir || len(d.Programmed()) != 3 {
		t.Fatalf("after the refused shrink: generation %s (was %s), %d frontends, want 3", d.pinDir, oldDir, len(d.Programmed()))
	}
}

// openWithLayout opens a Datapath built as if its maps' layout were
// change (testLayoutChange; "" is this build's own), as an upgrade to or a
// rollback from another release would; the layout is this build's again
// when the test ends.
func openWithLayout(t *testing.T, change string, cfg Config) *Datapath {
	t.Helper()
	t.Cleanup(func() { testLayoutChange = "" })
	testLayoutChange = change
	return openTest(t, cfg)
}

// carryWaiting fails the test unless d waits for its first Apply to
// switch, with sk_state to carry.
func carryWaiting(t *testing.T, d *Datapath) {
	t.Helper()
	if d.pending == nil || d.pending.carrying == nil {
		t.Fatalf("no migration waiting with an sk_state carry: %s", d.Migration())
	}
}

// TestLayoutChangeRefills: maps of another layout are not copied (their
// bytes mean something else); the new maps start empty and Apply fills
// them. Then the rollback does the same.
func TestLayoutChangeRefills(t *testing.T) {
	dir := pinDir(t)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	d := openTest(t, Config{BPFFSPath: dir})
	mustApply(t, d, state(a))
	skState := mapID(t, d.Maps().SkState)
	d.Close()
	for _, change := range []string{"1", ""} {
		d := openWithLayout(t, change, Config{BPFFSPath: dir})
		onlyGeneration(t, d)
		// sock_state changed too: sockets opened before lose their state
		// (docs/upgrade-maps.md says what that costs).
		if id := mapID(t, d.Maps().SkState); id == skState {
			t.Errorf("layout change %q: sk_state map %d kept although its value type changed", change, id)
		}
		skState = mapID(t, d.Maps().SkState)
		if n := len(d.Programmed()); n != 0 {
			t.Fatalf("layout change %q: %d frontends adopted from maps of another layout", change, n)
		}
		mustApply(t, d, state(a))
		p := testProgs(t, d)
		if r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1); r.verdict != verdictXlated {
			t.Errorf("layout change %q: not translated after Apply: %+v", change, r)
		}
		d.Close()
	}
}

// TestServiceLayoutChangeKeepsSockState: a release that changed the
// Service maps but not struct sock_state refills the Service maps and
// keeps sk_state, the same kernel object: every live socket keeps its
// state with no copy at all. The rollback does the same.
func TestServiceLayoutChangeKeepsSockState(t *testing.T) {
	dir := pinDir(t)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	d := openTest(t, Config{BPFFSPath: dir})
	mustApply(t, d, state(a))
	skState := mapID(t, d.Maps().SkState)
	services := mapID(t, d.Maps().Services)
	d.Close()
	for _, change := range []string{"service-maps", ""} {
		d := openWithLayout(t, change, Config{BPFFSPath: dir})
		onlyGeneration(t, d)
		if id := mapID(t, d.Maps().Services); id == services {
			t.Fatalf("layout change %q: services map %d kept although its value type changed", change, id)
		}
		services = mapID(t, d.Maps().Services)
		if id := mapID(t, d.Maps().SkState); id != skState {
			t.Errorf("layout change %q: sk_state is map %d, was %d, although struct sock_state did not change (%s)", change, id, skState, d.Migration())
		}
		if !strings.Contains(d.Migration(), "kept [sk_state]") {
			t.Errorf("layout change %q: migration %q does not say sk_state was kept", change, d.Migration())
		}
		mustApply(t, d, state(a))
		d.Close()
	}
}

// TestCarryReadsOnlyItsLayout: the carry iterator reads the old sk_state
// as struct sock_state_from, so it runs for a map of that shape (type
// names aside: testLayoutChange renames the struct, not its bytes) and
// for no other.
func TestCarryReadsOnlyItsLayout(t *testing.T) {
	requireRoot(t)
	spec := loadedSpec(t, Config{})
	for _, tc := range []struct {
		name  string
		value btf.Type
		size  uint32
		want  bool
	}{
		{"this release's sock_state", spec.Maps["sk_state"].Value, spec.Maps["sk_state"].ValueSize, true},
		{"sock_state renamed", renamed(spec.Maps["sk_state"].Value), spec.Maps["sk_state"].ValueSize, true},
		{"a field of sock_state renamed", fieldRenamed(spec.Maps["sk_state"].Value), spec.Maps["sk_state"].ValueSize, false},
		{"another value", spec.Maps["affinity"].Value, spec.Maps["affinity"].ValueSize, false},
	} {
		ms := spec.Maps["sk_state"].Copy()
		ms.Value, ms.ValueSize = tc.value, tc.size
		ms.Pinning = ebpf.PinNone
		m, err := ebpf.NewMap(ms)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ok, why, err := canCarry(m)
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ok != tc.want {
			t.Errorf("%s: canCarry %v (%s), want %v", tc.name, ok, why, tc.want)
		}
	}
}

func fieldRenamed(t btf.Type) btf.Type {
	c := btf.Copy(t)
	if s, ok := c.(*btf.Struct); ok {
		s.Members[len(s.Members)-1].Name += "_v2"
	}
	return c
}

func renamed(t btf.Type) btf.Type {
	c := btf.Copy(t)
	if s, ok := c.(*btf.Struct); ok {
		s.Name += "_v2"
	}
	return c
}

// TestLegacyPinsMigrate: maps pinned straight under maps/ by an agent
// from before versioned pins are adopted (same layout: the same maps) and
// their old names removed.
func TestLegacyPinsMigrate(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	mustApply(t, d, state(a))
	services := mapID(t, d.Maps().Services)
	gen := d.pinDir
	d.Close()
	for name := range stateMaps(d.Maps()) {
		if err := os.Rename(filepath.Join(gen, name), filepath.Join(mapsDir(dir), name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(gen); err != nil {
		t.Fatal(err)
	}
	d = openTest(t, Config{BPFFSPath: dir})
	onlyGeneration(t, d)
	if len(d.Programmed()) != 1 || mapID(t, d.Maps().Services) != services {
		t.Fatalf("legacy maps not adopted: %d frontends, services map %d (was %d)", len(d.Programmed()), mapID(t, d.Maps().Services), services)
	}
}
