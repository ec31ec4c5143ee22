package agent

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// remoteApplier is a deltaApplier that also takes the NodePort addresses,
// as *datapath.Datapath does.
type remoteApplier struct {
	deltaApplier
	mu   sync.Mutex
	sets [][]netip.Addr // the other nodes'
	own  [][]netip.Addr // this node's
	fail error
}

var _ NodeAddressSetter = (*remoteApplier)(nil)

func (d *remoteApplier) SetNodeAddresses(local, remote []netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sets = append(d.sets, slices.Clone(remote))
	d.own = append(d.own, slices.Clone(local))
	return d.fail
}

func (d *remoteApplier) calls() [][]netip.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sets)
}

// TestRemoteNodeAddressesReachTheDatapath: the first sync hands the other
// nodes' addresses to the datapath; a Service change reads no Node and
// sets nothing; another Node's change sets the new list without a full
// rebuild, and its bad address is a problem like any other; a refused set
// fails the sync and is retried; this node's own new address leaves the
// list; a full resync with nothing new sets nothing.
func TestRemoteNodeAddressesReachTheDatapath(t *testing.T) {
	in := bigSnapshot(3)
	in.Nodes = []*corev1.Node{testkit.Node("node-a", "zone-a", "InternalIP=10.1.0.5"), testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.6")}
	src := newFakeTracked(in)
	dp := &remoteApplier{}
	var local []netip.Addr
	a, err := New(Config{Datapath: dp, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), HealthTimeout: time.Minute,
		HealthChecks: nopHealthChecks{}, LocalAddresses: func() ([]netip.Addr, error) { return local, nil }})
	if err != nil {
		t.Fatal(err)
	}
	a.src, a.started = src, time.Now()
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	expect := func(step string, want ...[]netip.Addr) {
		t.Helper()
		if got := dp.calls(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("%s: SetNodeAddresses calls with the other nodes' %v, want %v", step, got, want)
		}
	}

	if !a.sync(true) {
		t.Fatal("first sync failed")
	}
	expect("first sync", addrs("10.1.0.6"))

	nodesRead := src.nodesCalls
	nn := types.NamespacedName{Namespace: "default", Name: "svc-1"}
	src.put(nn, servicemap.ServiceObjects{Service: src.ServiceObjects(nn).Service})
	a.sync(false)
	expect("a Service change", addrs("10.1.0.6"))
	if src.nodesCalls != nodesRead {
		t.Errorf("a Service change listed the Nodes %d times", src.nodesCalls-nodesRead)
	}

	src.setOtherNodes(testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.7"), testkit.Node("node-c", "zone-a", "InternalIP=10.1.0.300"))
	if !a.sync(false) {
		t.Fatal("another Node's change: sync failed")
	}
	expect("another Node's change", addrs("10.1.0.6"), addrs("10.1.0.7"))
	if _, full, _, _ := dp.snapshot(); full != 1 {
		t.Errorf("another Node's change: %d full applies, want only the first sync's", full)
	}
	bad := model.Problem{Kind: model.KindNode, Object: types.NamespacedName{Name: "node-c"}}
	if !slices.ContainsFunc(a.reportedProblems(), func(p model.Problem) bool { return p.Kind == bad.Kind && p.Object == bad.Object }) {
		t.Errorf("node-c's bad address not reported: %v", a.reportedProblems())
	}

	dp.mu.Lock()
	dp.fail = errors.New("remote node map full")
	dp.mu.Unlock()
	src.setOtherNodes(testkit.Node("node-b", "zone-a", "InternalIP=10.1.0.8"))
	if a.sync(false) {
		t.Error("a refused SetNodeAddresses reported success")
	}
	dp.mu.Lock()
	dp.fail = nil
	dp.mu.Unlock()
	if !a.sync(false) { // the retry, with nothing new from the source
		t.Error("the retry failed")
	}
	expect("a refused set and its retry", addrs("10.1.0.6"), addrs("10.1.0.7"), addrs("10.1.0.8"), addrs("10.1.0.8"))
	if slices.ContainsFunc(a.reportedProblems(), func(p model.Problem) bool { return p.Object == bad.Object }) {
		t.Errorf("node-c is gone, its problem stays: %v", a.reportedProblems())
	}

	local = addrs("10.1.0.8") // now this node's: a VIP moved here
	src.put(nn, servicemap.ServiceObjects{Service: src.ServiceObjects(nn).Service})
	a.sync(false)
	expect("this node's new address", addrs("10.1.0.6"), addrs("10.1.0.7"), addrs("10.1.0.8"), addrs("10.1.0.8"), nil)
	dp.mu.Lock()
	own := dp.own[len(dp.own)-1]
	dp.mu.Unlock()
	if want := addrs("10.1.0.5", "10.1.0.8", "127.0.0.1"); !slices.Equal(own, want) {
		t.Errorf("this node's NodePort addresses handed over: %v, want %v (its Node's InternalIP, the new interface address, localhost)", own, want)
	}

	a.sync(true)
	if n := len(dp.calls()); n != 5 {
		t.Errorf("a full resync with nothing new: %d calls, want 5", n)
	}
}

// reportedProblems is what the last sync reported.
func (a *Agent) reportedProblems() []model.Problem {
	var out []model.Problem
	for p := range a.lastProblems {
		out = append(out, p)
	}
	return out
}
