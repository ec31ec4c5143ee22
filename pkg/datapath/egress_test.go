package datapath

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestEgressHookOnlyWhileRangesProgrammed: the egress hook, which every
// packet of the cgroup's sockets would pay for, is attached to the cgroup
// exactly while a programmed frontend has loadBalancerSourceRanges:
// through Apply and ApplyDelta, across a restart that adopts the maps, and
// RepairPins puts it back only while it is needed.
func TestEgressHookOnlyWhileRangesProgrammed(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	cfg := Config{BPFFSPath: dir, CgroupPath: cg.Path()}
	plain, ranged := egressFrontends()

	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantEgress(t, "opened on nothing", cg, dir, false)
	mustApply(t, d, state(plain))
	wantEgress(t, "only a frontend without ranges", cg, dir, false)
	if res := d.ApplyDelta(servicemap.Delta{Upsert: state(ranged)}); res.Err() != nil || res.HookErr != nil {
		t.Fatalf("ApplyDelta of a frontend with ranges: %v %v", res.Err(), res.HookErr)
	}
	wantEgress(t, "a frontend with ranges added", cg, dir, true)

	if err := os.Remove(filepath.Join(dir, "links", "egress")); err != nil {
		t.Fatal(err)
	}
	if fixed, err := d.RepairPins(); err != nil || !strings.Contains(strings.Join(fixed, " "), "egress") {
		t.Fatalf("RepairPins with the needed egress link unpinned: fixed %v, err %v", fixed, err)
	}
	wantEgress(t, "repaired", cg, dir, true)

	d.Close()
	wantEgress(t, "agent stopped", cg, dir, true)
	if d, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	wantEgress(t, "restarted on maps with ranges", cg, dir, true)
	if res := d.Apply(state(plain)); res.Err() != nil || res.HookErr != nil {
		t.Fatalf("Apply without the ranged frontend: %v %v", res.Err(), res.HookErr)
	}
	wantEgress(t, "the ranged frontend removed", cg, dir, false)
	if fixed, err := d.RepairPins(); err != nil || len(fixed) != 0 {
		t.Fatalf("RepairPins with no egress needed: fixed %v, err %v", fixed, err)
	}
	wantEgress(t, "after RepairPins", cg, dir, false)

	mustApply(t, d, state(plain, ranged))
	wantEgress(t, "the ranged frontend back", cg, dir, true)
	d.Close()
	// A restart on maps with no ranges takes the hook away at Open.
	lone, err := Open(Config{BPFFSPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, lone, state(plain))
	lone.Close()
	if d, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	wantEgress(t, "restarted on maps without ranges", cg, dir, false)
}

// TestEgressHookFailureRefusesOnlyRangedFrontends: when the egress hook
// cannot be attached, a frontend with ranges is refused (written, it would
// let every source through) with an error that says so, and the others
// are programmed; once it can, the next Apply programs it.
func TestEgressHookFailureRefusesOnlyRangedFrontends(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path()})
	plain, ranged := egressFrontends()

	// Something that is not a link where the egress link goes.
	squatter, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	pin := filepath.Join(dir, "links", "egress")
	if err := squatter.Pin(pin); err != nil {
		t.Fatal(err)
	}
	res := d.Apply(state(plain, ranged))
	if err := res.Failed[ranged.Key]; err == nil || !strings.Contains(err.Error(), "loadBalancerSourceRanges need the egress hook") {
		t.Errorf("the ranged frontend with no egress hook: %v, want refused naming the egress hook", err)
	}
	if len(res.Failed) != 1 || res.Upserted != 1 {
		t.Errorf("failed %v, upserted %d: want only the ranged frontend refused", res.Failed, res.Upserted)
	}
	if _, ok := d.Programmed()[ranged.Key]; ok {
		t.Errorf("the ranged frontend was programmed without its egress hook")
	}
	if err := squatter.Unpin(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, d, state(plain, ranged))
	wantEgress(t, "the path free again", cg, dir, true)
}

// egressFrontends are a ClusterIP frontend and an LB IP frontend with a
// source range.
func egressFrontends() (plain, ranged servicemap.Frontend) {
	plain = frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080")
	ranged = frontend("192.0.2.10", 80, servicemap.TCP, "10.244.1.11:8080")
	ranged.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}
	return plain, ranged
}

// wantEgress checks both the pin and what the kernel runs on the cgroup.
func wantEgress(t *testing.T, when string, cg *lab.Cgroup, dir string, want bool) {
	t.Helper()
	_, err := os.Lstat(filepath.Join(dir, "links", "egress"))
	pinned := err == nil
	q, err := link.QueryPrograms(link.QueryOptions{Target: cg.FD(), Attach: ebpf.AttachCGroupInetEgress})
	if err != nil {
		t.Fatalf("%s: querying the cgroup's egress programs: %v", when, err)
	}
	if pinned != want || (len(q.Programs) > 0) != want {
		t.Errorf("%s: egress link pinned %v, %d egress programs on the cgroup; want attached=%v", when, pinned, len(q.Programs), want)
	}
}

// TestEgressHookFollowsAMigration: across a layout change the links keep
// the older agent's programs until the first Apply fills the new maps;
// then the egress hook is attached (running the new program) when the new
// maps hold a frontend with ranges, and detached when they no longer do.
func TestEgressHookFollowsAMigration(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	plain, ranged := egressFrontends()

	old := openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 8})
	mustApply(t, old, state(plain))
	old.Close()
	d := openWithLayout(t, "1", Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 4})
	if d.pending == nil {
		t.Fatalf("no migration waits for the first Apply (%s)", d.Migration())
	}
	if res := d.Apply(state(plain, ranged)); res.Err() != nil || res.Switched == "" {
		t.Fatalf("first Apply after the layout change: %v, switched %q", res.Err(), res.Switched)
	}
	wantEgress(t, "migrated onto maps with ranges", cg, dir, true)
	progs, err := OpenHookPrograms(dir, "egress")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := progID(t, progs["egress"]), progID(t, d.objs.SocklbPrograms.SocklbEgress); got != want {
		t.Errorf("the egress link runs program %d, want the new agent's %d", got, want)
	}
	progs.Close()
	d.Close()

	d = openWithLayout(t, "", Config{BPFFSPath: dir, CgroupPath: cg.Path(), MaxServices: 8})
	if d.pending == nil {
		t.Fatalf("no migration waits for the first Apply (%s)", d.Migration())
	}
	wantEgress(t, "a migration waiting for its first Apply", cg, dir, true)
	if res := d.Apply(state(plain)); res.Err() != nil || res.Switched == "" {
		t.Fatalf("first Apply after the second layout change: %v, switched %q", res.Err(), res.Switched)
	}
	wantEgress(t, "migrated onto maps without ranges", cg, dir, false)
}
