package host

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/socklb/socklb/internal/testkit"
)

// TestWatchAddressesSeesANewAddress: in a network namespace of its own,
// WatchAddresses reports an address added to an interface there, ends
// when its context does, and sees nothing of the namespace it was not
// started in. Nothing leaves the namespace: no packet is sent.
func TestWatchAddressesSeesANewAddress(t *testing.T) {
	testkit.RequireRoot(t, "creates a network namespace")
	ns, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close() // the namespace goes with its last handle and thread
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan struct{}, 100)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		// The subscription is made in the namespace of the thread that
		// opens it: this goroutine's, moved into ns for its lifetime.
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return // the thread stays locked: it dies with the goroutine
		}
		WatchAddresses(ctx, func() { events <- struct{}{} }, func(err error) { t.Logf("watch: %v", err) })
	}()
	time.Sleep(100 * time.Millisecond) // let it subscribe
	for len(events) > 0 {
		<-events // lo coming up
	}

	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("192.0.2.77"), Mask: net.CIDRMask(32, 32)}}
	if err := h.AddrAdd(lo, addr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-events:
	case <-time.After(2 * time.Second):
		t.Fatal("no event within 2s for an address added in the namespace")
	}
	if err := h.AddrDel(lo, addr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-events:
	case <-time.After(2 * time.Second):
		t.Fatal("no event within 2s for an address removed in the namespace")
	}

	cancel()
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Fatal("WatchAddresses did not return within 2s of its context's end")
	}
}

// newNetns creates a network namespace and returns a handle to it,
// leaving the calling thread where it was.
func newNetns() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	defer orig.Close()
	ns, err := netns.New() // moves this thread into it
	if err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	if err := netns.Set(orig); err != nil {
		// This thread is in the new namespace for good: let it die with
		// the goroutine rather than serve another one.
		return ns, err
	}
	runtime.UnlockOSThread()
	return ns, nil
}
