package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
)

// Backoff between subscriptions after one failed.
const (
	addrRetryMin = 100 * time.Millisecond
	addrRetryMax = 10 * time.Second
)

// WatchAddresses calls changed after every change of an interface address
// in this network namespace (netlink RTM_NEWADDR and RTM_DELADDR), until
// ctx is done, and closes its subscription then. The subscription's socket
// belongs to the namespace of the thread that opens it: call it from the
// agent's own namespace (the agent's process, entered with nsenter or run
// in it), never from a thread that switched namespaces.
//
// A subscription that fails (the kernel drops a socket whose receive
// buffer overflowed, ENOBUFS) is opened again after a pause that grows
// from 100 ms to 10 s, and changed is called once it is back, since events
// were lost meanwhile. Every failure goes to logErr; none is fatal: the
// caller still reads the addresses at each sync.
func WatchAddresses(ctx context.Context, changed func(), logErr func(error)) {
	backoff := addrRetryMin
	for again := false; ; again = true {
		start := time.Now()
		err := watchAddressesOnce(ctx, changed, logErr, again)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > addrRetryMax {
			backoff = addrRetryMin // it ran a while: not a failing loop
		}
		logErr(fmt.Errorf("%w; subscribing again in %s", err, backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, addrRetryMax)
	}
}

// errSubscriptionEnded: netlink closed the updates channel, after
// reporting why to the error callback.
var errSubscriptionEnded = errors.New("interface address subscription ended")

// watchAddressesOnce runs one subscription until it fails or ctx is done.
func watchAddressesOnce(ctx context.Context, changed func(), logErr func(error), again bool) error {
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done) // closes the socket
	opts := netlink.AddrSubscribeOptions{ErrorCallback: func(err error) {
		if ctx.Err() == nil {
			logErr(fmt.Errorf("interface address subscription: %w", err))
		}
	}}
	if err := netlink.AddrSubscribeWithOptions(updates, done, opts); err != nil {
		return fmt.Errorf("subscribing to interface address changes: %w", err)
	}
	if again {
		changed()
	}
	for {
		select {
		case <-ctx.Done():
			// The receiving goroutine may be blocked sending: let it
			// finish, it ends when the socket closes.
			go func() {
				for range updates {
				}
			}()
			return nil
		case _, ok := <-updates:
			if !ok {
				return errSubscriptionEnded
			}
			changed()
		}
	}
}
