package main

import (
	"context"
	"sync"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
)

// openBeside starts src, whose informers then LIST the API server, and
// runs open (the datapath's load, probes and attach) meanwhile: the first
// sync waits for both, so it waits for the longer one instead of the sum.
// The agent's Run takes over the returned Source; ctx stops src if the
// agent never runs (open failed).
func openBeside[T any](ctx context.Context, src source.Source, open func() (T, error)) (source.Source, T, error) {
	early := source.StartEarly(ctx, src)
	v, err := open()
	return early, v, err
}

// lateReport takes the source's problems before the agent, which logs and
// counts them, exists (the source starts before the datapath, the agent
// after it), and hands them over once it does, in order.
type lateReport struct {
	mu   sync.Mutex
	to   model.ReportFunc
	held []model.Problem
}

func (r *lateReport) report(p model.Problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to == nil {
		r.held = append(r.held, p)
		return
	}
	r.to(p)
}

// deliver sends the held problems to to, then every later one.
func (r *lateReport) deliver(to model.ReportFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.held {
		to(p)
	}
	r.held, r.to = nil, to
}
