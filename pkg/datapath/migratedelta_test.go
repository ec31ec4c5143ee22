package datapath

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestMigrationSwitchesOnceADeltaProgramsTheRest: a layout change whose
// first Apply fails a frontend keeps the links on the old maps. The
// agent's retry, and every sync after the first, is an ApplyDelta; once
// one of those leaves nothing unprogrammed the links must switch. Waiting
// for the next full Apply (the hourly resync) would leave the hooks on old
// maps that no Apply writes any more: every endpoint change in between
// would be invisible to them.
func TestMigrationSwitchesOnceADeltaProgramsTheRest(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	b := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.1.2:80")
	c := frontend("10.96.0.12", 80, servicemap.TCP, "10.244.1.3:80")
	old := openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 8})
	mustApply(t, old, state(a, b))
	old.Close()

	d := openWithLayout(t, "1", Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 2})
	if d.pending == nil {
		t.Fatalf("no migration waits for the first Apply (%s)", d.Migration())
	}
	want := state(a, b, c)
	res := d.Apply(want)
	if len(res.Failed) != 1 || res.Switched != "" {
		t.Fatalf("3 frontends into --max-services 2: failed %v, switched %q; want one failure and no switch", res.Failed, res.Switched)
	}
	var failed servicemap.FrontendKey
	for k := range res.Failed {
		failed = k
	}
	// One Service goes away; the retry (the agent adds its last failures to
	// the delta) programs the one that did not fit.
	var gone servicemap.FrontendKey
	for k := range want {
		if k != failed {
			gone = k
			break
		}
	}
	delete(want, gone)
	res = d.ApplyDelta(servicemap.Delta{Remove: []servicemap.FrontendKey{gone}, Upsert: servicemap.State{failed: want[failed]}})
	if err := res.Err(); err != nil {
		t.Fatalf("ApplyDelta: %v", err)
	}
	if res.Switched == "" || d.pending != nil {
		t.Errorf("every frontend is programmed, but the links still serve the old maps (switched %q)", res.Switched)
	}
	progs, err := OpenHookPrograms(dir, "connect4")
	if err != nil {
		t.Fatal(err)
	}
	defer progs.Close()
	if got, want := progID(t, progs["connect4"]), progID(t, d.objs.SocklbPrograms.SocklbConnect4); got != want {
		t.Errorf("connect4's link runs program %d, want the new agent's %d", got, want)
	}
	if _, err := d.RepairPins(); err != nil {
		t.Errorf("RepairPins after the switch: %v", err)
	}
}

// childCgroup is a fresh child cgroup the hooks can attach to, removed
// at the end.
func childCgroup(t *testing.T) *lab.Cgroup {
	t.Helper()
	cg, err := lab.NewCgroup()
	if err != nil {
		t.Fatalf("child cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Errorf("removing cgroup %s: %v", cg.Path(), err)
		}
	})
	return cg
}

func progID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}
