package agent

import (
	"context"
	"time"
)

// PinRepairer checks the pins the datapath serves from and puts back the
// ones that disappeared; *datapath.Datapath is one.
type PinRepairer interface {
	RepairPins() (repaired []string, err error)
}

// DefaultPinCheckInterval is how often the agent looks for pins removed
// under it.
const DefaultPinCheckInterval = 10 * time.Second

// watchPins repairs pins removed under the agent, and fails /healthz
// while they cannot be trusted.
func (a *Agent) watchPins(ctx context.Context) {
	every := a.cfg.PinCheckInterval
	if every <= 0 {
		every = DefaultPinCheckInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fixed, err := a.cfg.Pins.RepairPins()
		if len(fixed) > 0 {
			a.log.Warn("pins disappeared under the running agent (socklb cleanup --force, or removed by hand); re-created them", "pins", fixed)
			a.metrics.pinsRepaired(len(fixed))
		}
		a.health.PinsBroken(err)
		switch {
		case err != nil && err.Error() != last:
			a.log.Error("the pinned datapath cannot be trusted; /healthz fails until it can", "err", err)
		case err == nil && last != "":
			a.log.Info("the pinned datapath is whole again")
		}
		last = ""
		if err != nil {
			last = err.Error()
		}
	}
}
