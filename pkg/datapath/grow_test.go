package datapath

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestGrowKeepsServing: growing the maps past their size moves the hooks
// to bigger maps holding every frontend (same ids), switches the pinned
// links to the new programs, drops the old generation, and then takes
// what did not fit before; a growth past the budget is refused, naming
// it, and changes nothing; a restart keeps the grown sizes until the flags
// reach them.
func TestGrowKeepsServing(t *testing.T) {
	dir := pinDir(t)
	cg := childCgroup(t)
	// Room for exactly one growth, to 8 frontends and 16 backends.
	cfg := Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 4, MaxBackends: 8,
		GrowBudget: mapMemory(Config{MaxServices: 8, MaxBackends: 16})}
	d := openTest(t, cfg)
	var fes []servicemap.Frontend
	for i := range 4 {
		fes = append(fes, frontend(fmt.Sprintf("10.96.0.%d", 10+i), 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80"))
	}
	mustApply(t, d, state(fes...))
	before := d.Programmed()
	oldDir := d.pinDir

	got, err := d.Grow(servicemap.Capacity{Frontends: 6, Backends: 12})
	if err != nil {
		t.Fatalf("Grow: %v", err)
	}
	if got.Frontends != 8 || got.Backends != 16 {
		t.Errorf("grown to %+v, want 8 frontends and 16 backends (the next powers of two)", got)
	}
	if d.pinDir == oldDir {
		t.Fatalf("still in generation %s after growing", oldDir)
	}
	onlyGeneration(t, d)
	if p := d.Programmed(); !maps.EqualFunc(p, before, func(a, b Service) bool { return a.Frontend.Equal(b.Frontend) && a.ID == b.ID }) {
		t.Errorf("frontends after growing %v, want %v", p, before)
	}
	progs, err := OpenHookPrograms(dir, "connect4")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := progID(t, progs["connect4"]), progID(t, d.objs.SocklbPrograms.SocklbConnect4); got != want {
		t.Errorf("connect4's link runs program %d, want the grown maps' %d", got, want)
	}
	progs.Close()
	p := testProgs(t, d)
	if r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.12:80"), servicemap.TCP, 1); !r.addrPort.IsValid() || r.addrPort.Addr().String() == "10.96.0.12" {
		t.Errorf("10.96.0.12:80 after growing translated to %v", r.addrPort)
	}
	fes = append(fes, frontend("10.96.0.20", 80, servicemap.TCP, "10.244.1.3:80"), frontend("10.96.0.21", 80, servicemap.TCP, "10.244.1.3:80"))
	mustApply(t, d, state(fes...))

	if _, err := d.Grow(servicemap.Capacity{Frontends: 9, Backends: 17}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--map-memory-budget") {
		t.Errorf("Grow past the budget: %v, want ErrBudget naming --map-memory-budget", err)
	}
	if c := d.Capacity(); c.Frontends != 8 || c.Backends != 16 || len(d.Programmed()) != 6 {
		t.Errorf("after a refused growth: %+v with %d frontends, want 8/16 with 6", c, len(d.Programmed()))
	}
	grown := d.pinDir
	d.Close()

	d = openTest(t, cfg)
	if c := d.Capacity(); c.Frontends != 8 || c.Backends != 16 || d.pinDir != grown || len(d.Programmed()) != 6 {
		t.Errorf("restarted with the original flags: %+v in %s with %d frontends, want the grown 8/16 in %s with 6", c, d.pinDir, len(d.Programmed()), grown)
	}
	d.Close()

	// Flags still below the grown sizes (the budget off, too) keep them:
	// shrinking could fail the copy, and the agent with it.
	other := cfg
	other.MaxServices, other.MaxBackends, other.GrowBudget = 2, 16, 0
	d = openTest(t, other)
	if c := d.Capacity(); c.Frontends != 8 || c.Backends != 16 || len(d.Programmed()) != 6 {
		t.Errorf("restarted with smaller flags: %+v with %d frontends, want the grown 8/16 with 6", c, len(d.Programmed()))
	}
	d.Close()

	// Flags that reach the grown sizes own them again: the record goes.
	other.MaxServices, other.MaxBackends = 16, 32
	d = openTest(t, other)
	if c := d.Capacity(); c.Frontends != 16 || c.Backends != 32 || len(d.Programmed()) != 6 {
		t.Errorf("restarted with larger flags: %+v with %d frontends, want 16/32 with 6", c, len(d.Programmed()))
	}
	if grownRecorded(dir) {
		t.Error("the growth record outlived flags that reach the grown sizes")
	}
}

// TestGrowthBudgetEstimate: the estimate grows linearly with the sizes
// (the stats array's extra slot, 16 bytes, aside); no map it counts has
// values per CPU, so it is the same on any machine.
func TestGrowthBudgetEstimate(t *testing.T) {
	c := Config{MaxServices: 1 << 10, MaxBackends: 1 << 12}
	c2 := c
	c2.MaxServices, c2.MaxBackends = c.MaxServices*2, c.MaxBackends*2
	if got, want := mapMemory(c2), 2*mapMemory(c); got+16 != want {
		t.Errorf("estimate at twice the sizes %d, want twice %d less the one extra stats slot", got, mapMemory(c))
	}
	if got, ok := grownConfig(Config{MaxServices: 8, MaxBackends: 8, GrowBudget: mapMemory(Config{MaxServices: 16, MaxBackends: 8})},
		servicemap.Capacity{Frontends: 20, Backends: 20}); !ok || got.MaxServices != 16 || got.MaxBackends != 8 {
		t.Errorf("grown within a budget for 16/8: %d/%d (ok %v), want 16/8: as much as fits", got.MaxServices, got.MaxBackends, ok)
	}
	// A size that is no power of two is never halved below itself.
	base := Config{MaxServices: 8, MaxBackends: 100000}
	base.GrowBudget = mapMemory(Config{MaxServices: 16, MaxBackends: 100000})
	if got, ok := grownConfig(base, servicemap.Capacity{Frontends: 12, Backends: 150000}); !ok || got.MaxServices != 16 || got.MaxBackends != 100000 {
		t.Errorf("grown from 8/100000 within a budget for 16/100000: %d/%d (ok %v), want 16/100000", got.MaxServices, got.MaxBackends, ok)
	}
}
