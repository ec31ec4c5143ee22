package datapath

import (
	"strings"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestCarryLossDoesNotFailHealth: sockets the sk_state carry could not
// give storage in the new map lose their state, which is what an upgrade
// cost before the carry existed (prepareCarry: "a failure costs only that
// state"). The migration still finishes: the loss is said in the
// migration's note, and RepairPins, whose error fails /healthz for as long
// as it lasts, must not report it for the rest of the agent's life.
func TestCarryLossDoesNotFailHealth(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	a := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	old := openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path()})
	mustApply(t, old, state(a))
	old.Close()

	d := openWithLayout(t, "1", Config{BPFFSPath: dir, CgroupPath: cg.Path()})
	carryWaiting(t, d)
	// What the iterator counts when the kernel gives a socket no storage
	// in the new sk_state (sk_carried[1], bpf/c/skcarry.c).
	if err := d.pending.carrying.carried.Put(uint32(1), uint64(1)); err != nil {
		t.Fatal(err)
	}
	res := mustApply(t, d, state(a))
	if res.Switched == "" || d.pending != nil {
		t.Fatalf("the links did not switch (switched %q)", res.Switched)
	}
	if !strings.Contains(res.Switched, "1 sockets got no storage") {
		t.Errorf("the migration's note %q does not say a socket lost its state", res.Switched)
	}
	if _, err := d.RepairPins(); err != nil {
		t.Errorf("RepairPins after a switch that lost one socket's state: %v", err)
	}
}
