package kube

// signal coalesces informer events: any number of pokes between two reads
// of C leave one value in it, so a burst of events (a rollout touching a
// hundred EndpointSlices) costs the agent a few rebuilds, not a hundred.
type signal struct {
	C chan struct{}
}

func newSignal() signal { return signal{C: make(chan struct{}, 1)} }

// poke never blocks: informer handlers must not stall the informers.
func (s signal) poke() {
	select {
	case s.C <- struct{}{}:
	default:
	}
}

// drain forgets a pending poke.
func (s signal) drain() {
	select {
	case <-s.C:
	default:
	}
}
