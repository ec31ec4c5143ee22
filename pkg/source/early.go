package source

import (
	"context"
	"sync"
	"time"
)

// FirstChanger is a Source that knows when it first signalled a change:
// for a source started early, when its caches synced, which may be before
// anyone called Run.
type FirstChanger interface {
	FirstChange() time.Time
}

// StartEarly starts src's Run now, so its informers list the API while the
// caller does something else that the first sync also waits for (the
// datapath's load), and returns src as a Source whose Run takes over:
// Run attaches changed, delivers a change src signalled before it (the
// caches' sync), and returns what src's Run returns. ctx stops src, as
// it would stop src.Run; cancel it if Run is never called. A Tracked src
// stays Tracked.
func StartEarly(ctx context.Context, src Source) Source {
	e := &early{Source: src, done: make(chan struct{})}
	go func() {
		e.err = src.Run(ctx, e.poke)
		close(e.done)
	}()
	if t, ok := src.(Tracked); ok {
		return &earlyTracked{Tracked: t, e: e}
	}
	return e
}

type early struct {
	Source
	// mu is held while changed runs, so the missed change delivered by
	// Run and src's own calls are never concurrent (Source's contract).
	mu      sync.Mutex
	changed func()
	missed  bool
	first   time.Time
	done    chan struct{}
	err     error // src.Run's, once done is closed
}

func (e *early) poke() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first.IsZero() {
		e.first = time.Now()
	}
	if e.changed == nil {
		e.missed = true
		return
	}
	e.changed()
}

// FirstChange is when src first signalled a change; zero before that.
func (e *early) FirstChange() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// Run waits for src's Run, which started in StartEarly; ctx should be the
// one StartEarly had or a child of it.
func (e *early) Run(ctx context.Context, changed func()) error {
	e.mu.Lock()
	e.changed = changed
	if e.missed {
		e.missed = false
		changed()
	}
	e.mu.Unlock()
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return nil
	}
}

// earlyTracked keeps Checkout, Pending, ServiceObjects, NodeInput and
// Nodes of a Tracked source, which the agent's per-change sync needs.
type earlyTracked struct {
	Tracked
	e *early
}

func (t *earlyTracked) Run(ctx context.Context, changed func()) error {
	return t.e.Run(ctx, changed)
}

func (t *earlyTracked) FirstChange() time.Time { return t.e.FirstChange() }
