package agent

import (
	"context"
	"time"
)

// followAddresses turns the interface address events of Config.AddressEvents
// into syncs, at most one per AddressDebounce. Such a sync reads the
// interfaces again (withNodeFacts), as every sync does: the Tracker then
// recomputes the Services that read the node's addresses (NodePorts,
// externalIPs, health checks), the same node facts a change of this
// node's Node object brings, without rebuilding the Services that do not;
// and the other nodes' addresses are computed again without the new one.
// Events before the first sync are dropped: that sync reads the
// interfaces anyway, and a sync before the source has listed everything
// would program an empty state.
func (a *Agent) followAddresses(ctx context.Context, queue func()) {
	events := make(chan struct{}, 1)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		a.cfg.AddressEvents(ctx, func() {
			select {
			case events <- struct{}{}:
			default:
			}
		})
	}()
	var (
		timer  *time.Timer
		timerC <-chan time.Time
	)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			<-watching
			return
		case <-events:
			if timerC == nil {
				timer = time.NewTimer(AddressDebounce)
				timerC = timer.C
			}
		case <-timerC:
			timer, timerC = nil, nil
			if a.synced.Load() {
				queue()
			}
		}
	}
}
