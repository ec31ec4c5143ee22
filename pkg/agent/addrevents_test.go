package agent

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	if st := h.waitApply(); !hasFrontend(st, "10.1.0.5:30080") {
		t.Fatalf("first sync: no NodePort on 10.1.0.5: %v", keys(st))
	}
	h.settle()

	start := time.Now()
	addrs.add("10.1.0.9", 5)
	st := h.waitApply()
	if took := time.Since(start); !hasFrontend(st, "10.1.0.9:30080") || took > time.Second {
		t.Fatalf("after an address event: NodePort on 10.1.0.9 %v after %s; frontends %v", hasFrontend(st, "10.1.0.9:30080"), took, keys(st))
	}
	h.settle()
	select {
	case st := <-h.dp.applied:
		t.Fatalf("a burst of 5 events synced twice: %v", keys(st))
	case <-time.After(3 * AddressDebounce):
	}
}

func hasFrontend(st servicemap.State, addrPort string) bool {
	want := netip.MustParseAddrPort(addrPort)
	for k := range st {
		if k.Addr == want.Addr() && k.Port == want.Port() && k.Scope == servicemap.ScopeAny {
			return true
		}
	}
	return false
}

func keys(st servicemap.State) []string {
	var out []string
	for k := range st {
		out = append(out, k.String())
	}
	return out
}
