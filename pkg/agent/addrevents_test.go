package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// fakeAddresses is this node's interface addresses and their events.
type fakeAddresses struct {
	mu      sync.Mutex
	addrs   []netip.Addr
	changed func()
	running chan struct{} // closed when the watch starts
	ended   chan struct{} // closed when it returns
}

func (f *fakeAddresses) list() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs, nil
}

func (f *fakeAddresses) watch(ctx context.Context, changed func()) {
	defer close(f.ended)
	f.mu.Lock()
	f.changed = changed
	f.mu.Unlock()
	close(f.running)
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond) // closing a netlink socket is not instant either
}

// add gives the node an address and fires n events, as netlink does for
// an address and its routes' neighbours.
func (f *fakeAddresses) add(a string, n int) {
	f.mu.Lock()
	f.addrs = append(f.addrs, netip.MustParseAddr(a))
	changed := f.changed
	f.mu.Unlock()
	for range n {
		changed()
	}
}

// TestAddressEventsSync: an interface address event makes the agent sync
// within AddressDebounce and a little, and serve NodePorts on the new
// address, with no API change; a burst of events costs one sync; an event
// before the first sync is dropped (that sync reads the addresses itself);
// the watch ends with Run.
func TestAddressEventsSync(t *testing.T) {
	addrs := &fakeAddresses{running: make(chan struct{}), ended: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-addrs.ended:
		default:
			t.Error("the address watch still runs after Run returned")
		}
	})
	h := startAgent(t, func(c *Config) {
		c.LocalAddresses, c.AddressEvents = addrs.list, addrs.watch
	})
	<-addrs.running
	addrs.add("10.1.0.5", 1)
	select {
	case <-h.dp.applied:
		t.Fatal("an address event before the first sync synced")
	case <-time.After(3 * AddressDebounce):
	}

	np := service("web", "10.96.0.10")
	np.Spec.Type = corev1.ServiceTypeNodePort
	np.Spec.Ports[0].NodePort = 30080
	h.src.set(func(in *model.Input) { in.Services = []*corev1.Service{np} })
	if st := h.waitApply(); !h.dp.servesNodePort(st, "10.1.0.5:30080") {
		t.Fatalf("first sync: no NodePort on 10.1.0.5: %v", keys(st))
	}
	h.settle()

	start := time.Now()
	addrs.add("10.1.0.9", 5)
	st := h.waitApply()
	if took := time.Since(start); !h.dp.servesNodePort(st, "10.1.0.9:30080") || took > time.Second {
		t.Fatalf("after an address event: NodePort on 10.1.0.9 %v after %s; frontends %v", h.dp.servesNodePort(st, "10.1.0.9:30080"), took, keys(st))
	}
	h.settle()
	select {
	case st := <-h.dp.applied:
		t.Fatalf("a burst of 5 events synced twice: %v", keys(st))
	case <-time.After(3 * AddressDebounce):
	}
}

func keys(st servicemap.State) []string {
	var out []string
	for k := range st {
		out = append(out, k.String())
	}
	return out
}

// fakePackets is a per-packet path that only counts SetDevices.
type fakePackets struct{ sets int }

func (p *fakePackets) SetDevices([]datapath.Device) error { p.sets++; return nil }
func (p *fakePackets) ExpireFlows() (datapath.FlowStats, error) {
	return datapath.FlowStats{}, nil
}
func (p *fakePackets) FlowEvents() (map[socklbbpf.SocklbFlowEvent]uint64, error) { return nil, nil }

// TestAddressChangeRefreshesDevices: a sync that finds this node's
// interface addresses changed (an address event's, or any) points the
// per-packet path at its devices again, as a full sync does, though it
// rebuilds only the Services that read the addresses; a sync without one
// leaves the devices alone. A --devices name no interface has makes every
// refresh log its error, which is how the refreshes are counted here.
func TestAddressChangeRefreshesDevices(t *testing.T) {
	src := newFakeTracked(bigSnapshot(3))
	logs := &lockedBuffer{}
	local := []netip.Addr{netip.MustParseAddr("10.1.0.5")}
	a, err := New(Config{Datapath: &deltaApplier{}, Log: slog.New(slog.NewJSONHandler(logs, nil)), HealthTimeout: time.Minute,
		HealthChecks: nopHealthChecks{}, LocalAddresses: func() ([]netip.Addr, error) { return local, nil },
		Packets: &fakePackets{}, Devices: []string{"socklb-no-such-device"}})
	if err != nil {
		t.Fatal(err)
	}
	a.src, a.started = src, time.Now()
	refreshes := func() int {
		return len(logs.lines(t, "NodePort, LoadBalancer and externalIP traffic from other machines is not served; /healthz fails until it is"))
	}

	a.sync(true)
	if n := refreshes(); n != 1 {
		t.Fatalf("first sync: %d device refreshes, want 1", n)
	}
	nn := types.NamespacedName{Namespace: "default", Name: "svc-1"}
	src.put(nn, servicemap.ServiceObjects{Service: src.ServiceObjects(nn).Service})
	a.sync(false)
	if n := refreshes(); n != 1 {
		t.Fatalf("a Service change: %d device refreshes, want still 1", n)
	}
	local = append(local, netip.MustParseAddr("10.1.0.9"))
	a.sync(false)
	if n := refreshes(); n != 2 {
		t.Fatalf("an address change: %d device refreshes, want 2", n)
	}
	if _, full, _, _ := a.cfg.Datapath.(*deltaApplier).snapshot(); full != 1 {
		t.Errorf("an address change: %d full applies, want only the first sync's", full)
	}
}
