package datapath

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

func TestApplyOnlyRewritesChangedFrontends(t *testing.T) {
	d := openTest(t, Config{})
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	b := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.2.1:80")
	if res := mustApply(t, d, state(a, b)); res.Upserted != 2 {
		t.Fatalf("first apply wrote %d frontends, want 2", res.Upserted)
	}
	if res := mustApply(t, d, state(a, b)); res.Upserted != 0 || res.Removed != 0 {
		t.Fatalf("same state again wrote %d and removed %d, want nothing", res.Upserted, res.Removed)
	}
	before := d.Programmed()[a.Key]
	a2 := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.2:80", "10.244.1.3:80")
	if res := mustApply(t, d, state(a2, b)); res.Upserted != 1 {
		t.Fatalf("changing one frontend wrote %d, want 1", res.Upserted)
	}
	after := d.Programmed()[a2.Key]
	if after.Generation != before.Generation+1 || after.ID != before.ID {
		t.Errorf("generation %d->%d, id %d->%d: want the same id, next generation", before.Generation, after.Generation, before.ID, after.ID)
	}
	// The kept backend keeps its id (and so its counters).
	if before.BackendIDs[1] != after.BackendIDs[0] {
		t.Errorf("10.244.1.2:80 changed id %d -> %d", before.BackendIDs[1], after.BackendIDs[0])
	}
	// The removed backend and the old generation's slots are gone.
	var be socklbbpf.SocklbBackend
	if err := d.t.backends.Lookup(before.BackendIDs[0], &be); err == nil {
		t.Errorf("backend %d of removed 10.244.1.1:80 still in the map", before.BackendIDs[0])
	}
	if n := countKeys[socklbbpf.SocklbSlotKey](t, d.t.slots); n != 3 {
		t.Errorf("slots map holds %d entries, want 3 (2 for a, 1 for b)", n)
	}
	if res := mustApply(t, d, state(b)); res.Removed != 1 {
		t.Fatalf("removing a: %+v", res)
	}
	if n := countKeys[uint32](t, d.t.backends); n != 1 {
		t.Errorf("backends map holds %d entries after removing a, want 1", n)
	}
}

func TestReopenAdoptsPinnedState(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	p := testProgs(t, d)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	a.Service.Name, a.PortName = "web", "http"
	mustApply(t, d, state(a, frontend("10.96.0.20", 53, servicemap.UDP)))
	run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
	want := d.Programmed()
	d.Close()

	d2 := openTest(t, Config{BPFFSPath: dir})
	got := d2.Programmed()
	if len(got) != len(want) {
		t.Fatalf("adopted %d frontends, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if !g.Frontend.Equal(w.Frontend) || g.ID != w.ID || g.Generation != w.Generation {
			t.Errorf("adopted %s = %+v, want %+v", k, g, w)
		}
	}
	if res := mustApply(t, d2, state(a, frontend("10.96.0.20", 53, servicemap.UDP))); res.Upserted != 0 {
		t.Errorf("after adoption the same state rewrote %d frontends, want 0", res.Upserted)
	}
	dump, err := Dump(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, s := range dump {
		for _, b := range s.Backends {
			total += b.Connects
		}
	}
	if total != 1 {
		t.Errorf("counters after reopen sum to %d, want the 1 connect made before", total)
	}
}

// TestAdoptSweepsHalfWrittenUpdate: an agent killed between writing a new
// generation and flipping to it leaves unreferenced slots and backends;
// the next agent removes them and keeps the live generation.
func TestAdoptSweepsHalfWrittenUpdate(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	mustApply(t, d, state(a))
	live := d.Programmed()[a.Key]
	orphanSlot := socklbbpf.SocklbSlotKey{SvcId: live.ID, Generation: live.Generation + 1, Slot: 0}
	if err := d.t.slots.Put(orphanSlot, socklbbpf.SocklbSlotValue{BackendId: 999, SvcId: live.ID, Generation: live.Generation + 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.t.backends.Put(uint32(999), socklbbpf.SocklbBackend{Port: 1, Id: 999}); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2 := openTest(t, Config{BPFFSPath: dir})
	var sv socklbbpf.SocklbSlotValue
	if err := d2.t.slots.Lookup(orphanSlot, &sv); err == nil {
		t.Error("orphan slot of an unflipped generation survived adoption")
	}
	var be socklbbpf.SocklbBackend
	if err := d2.t.backends.Lookup(uint32(999), &be); err == nil {
		t.Error("orphan backend survived adoption")
	}
	if got := d2.Programmed()[a.Key]; !got.Frontend.Equal(a) {
		t.Errorf("live frontend changed by adoption: %+v", got.Frontend)
	}
}

// TestFullMapNamesTheFlag: a map too small for the desired state programs
// what fits, names the map and the flag for the rest, and leaves what was
// programmed before intact.
func TestFullMapNamesTheFlag(t *testing.T) {
	d := openTest(t, Config{MaxBackends: 4})
	ok := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	mustApply(t, d, state(ok))
	big := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.2.1:80", "10.244.2.2:80", "10.244.2.3:80")
	res := d.Apply(state(ok, big))
	err := res.Failed[big.Key]
	if err == nil {
		t.Fatalf("programming 5 backends into a 4-backend map succeeded: %+v", res)
	}
	for _, want := range []string{"10.96.0.11:80/TCP", "--max-backends", "full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// The agent's log line names the map from the error (key "map").
	if me := (*MapError)(nil); !errors.As(err, &me) || me.Map != "backends" {
		t.Errorf("error %q carries no MapError naming the backends map", err)
	}
	if _, ok := d.Programmed()[big.Key]; ok {
		t.Error("the frontend that did not fit is recorded as programmed")
	}
	if got := d.Programmed()[ok.Key]; !got.Frontend.Equal(ok) {
		t.Errorf("the frontend that was programmed before changed: %+v", got.Frontend)
	}
	// Nothing of the failed frontend is left behind in the maps.
	if n := countKeys[uint32](t, d.t.backends); n != 2 {
		t.Errorf("backends map holds %d entries, want the 2 of the programmed frontend", n)
	}
	// Room again: the next Apply programs it.
	if err := d.Apply(state(big)).Err(); err != nil {
		t.Fatalf("after freeing room: %v", err)
	}
}

func countKeys[K any](t *testing.T, m interface {
	NextKey(key, nextKeyOut any) error
}) int {
	t.Helper()
	n := 0
	var prev any
	for {
		var k K
		if err := m.NextKey(prev, &k); err != nil {
			return n
		}
		n++
		prev = k
	}
}

// TestApplyDeltaTouchesOnlyItsKeys: a Delta writes and removes its own
// frontends, leaves the others' generations alone, and ends where Apply of
// the whole state would (a full Apply afterwards finds nothing to do).
func TestApplyDeltaTouchesOnlyItsKeys(t *testing.T) {
	d := openTest(t, Config{})
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	b := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.2.1:80")
	c := frontend("10.96.0.12", 53, servicemap.UDP, "10.244.3.1:53")
	mustApply(t, d, state(a, b))

	a2 := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.2:80", "10.244.1.3:80")
	res := d.ApplyDelta(servicemap.Delta{Upsert: state(a2, c), Remove: []servicemap.FrontendKey{b.Key, c.Key}})
	if len(res.Failed) != 0 || res.Upserted != 2 || res.Removed != 1 {
		t.Fatalf("delta: %+v, want 2 upserted (a changed, c new), 1 removed (b; c is upserted, not removed)", res)
	}
	got := d.Programmed()
	if _, ok := got[b.Key]; ok {
		t.Errorf("b still programmed after its removal")
	}
	if got[a2.Key].Generation != 2 || got[c.Key].Generation != 1 {
		t.Errorf("generations a=%d c=%d, want 2 and 1", got[a2.Key].Generation, got[c.Key].Generation)
	}
	if res := d.ApplyDelta(servicemap.Delta{Upsert: state(b)}); res.Upserted != 1 {
		t.Fatalf("re-adding b: %+v", res)
	}
	if res := d.ApplyDelta(servicemap.Delta{Upsert: state(a2)}); res.Upserted != 0 {
		t.Errorf("an unchanged frontend in a delta was rewritten: %+v", res)
	}
	if res := mustApply(t, d, state(a2, b, c)); res.Upserted != 0 || res.Removed != 0 {
		t.Errorf("full Apply after the deltas still had work: %+v", res)
	}
	if n := countKeys[uint32](t, d.t.backends); n != 4 {
		t.Errorf("backends map holds %d entries, want 4", n)
	}
	if n := countKeys[socklbbpf.SocklbSlotKey](t, d.t.slots); n != 4 {
		t.Errorf("slots map holds %d entries, want 4", n)
	}
}
