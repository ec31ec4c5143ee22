package agent

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestExternalIPsFollowOtherNodes: an externalIP that becomes another
// Node's address is captured with that Node's change alone, without a
// full rebuild, and left alone again when the address moves away. A
// Service change lists no Node (the other Nodes' addresses are kept); a
// change of the other Nodes lists them once, for both the externalIP rule
// and where they serve NodePorts.
func TestExternalIPsFollowOtherNodes(t *testing.T) {
	in := bigSnapshot(3)
	web := in.Services[0].DeepCopy()
	web.Spec.ExternalIPs = []string{"10.1.0.7"}
	in.Services[0] = web
	in.Nodes = []*corev1.Node{testkit.Node("node-a", "zone-a", "InternalIP=10.1.0.5"), testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.6")}
	src := newFakeTracked(in)
	dp := &deltaApplier{}
	a, err := New(Config{Datapath: dp, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), HealthTimeout: time.Minute,
		HealthChecks: nopHealthChecks{}, LocalAddresses: noAddresses})
	if err != nil {
		t.Fatal(err)
	}
	a.src, a.started = src, time.Now()
	ext := servicemap.FrontendKey{Addr: netip.MustParseAddr("10.1.0.7"), Port: 80, Proto: servicemap.TCP}
	check := func(step string, captured bool, nodeLists int) {
		t.Helper()
		st, full, _, _ := dp.snapshot()
		if _, ok := st[ext]; ok != captured {
			t.Errorf("%s: externalIP %s captured = %v, want %v", step, ext, ok, captured)
		}
		if full != 1 {
			t.Errorf("%s: %d full applies, want only the first sync's", step, full)
		}
		if src.nodesCalls != nodeLists {
			t.Errorf("%s: the Nodes listed %d times in all, want %d", step, src.nodesCalls, nodeLists)
		}
		snap := src.Snapshot()
		snap.PeerAddresses = servicemap.PeerAddresses(snap)
		if want, _ := servicemap.Build(snap); !statesEqual(want, st) {
			t.Errorf("%s: the datapath holds %d frontends, not Build's %d", step, len(st), len(want))
		}
	}

	if !a.sync(true) {
		t.Fatal("first sync failed")
	}
	check("first sync", false, 0) // the snapshot holds the Nodes

	nn := types.NamespacedName{Namespace: "default", Name: "svc-1"}
	src.put(nn, servicemap.ServiceObjects{Service: src.ServiceObjects(nn).Service})
	a.sync(false)
	check("a Service change", false, 0)

	src.setOtherNodes(testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.6", "ExternalIP=10.1.0.7"))
	a.sync(false)
	check("the externalIP becomes another Node's", true, 1)

	src.put(nn, servicemap.ServiceObjects{Service: src.ServiceObjects(nn).Service})
	a.sync(false)
	check("a Service change", true, 1)

	src.setOtherNodes(testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.6"))
	a.sync(false)
	check("the address moves away", false, 2)
}

func statesEqual(a, b servicemap.State) bool {
	if len(a) != len(b) {
		return false
	}
	for k, fe := range a {
		if got, ok := b[k]; !ok || !got.Equal(fe) {
			return false
		}
	}
	return true
}
