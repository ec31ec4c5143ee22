// Package agent wires a Source to the datapath: every change of the API
// objects rebuilds the desired state with servicemap and applies it as a
// diff. It also serves kube-proxy-style health and Prometheus metrics.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// Applier is the datapath as the agent sees it; tests fake it.
type Applier interface {
	Apply(servicemap.State) datapath.ApplyResult
}

// Agent runs the sync loop.
type Agent struct {
	Source   source.Source
	Datapath Applier
	Log      *slog.Logger
	Health   *Health
	Metrics  *Metrics

	// lastProblems avoids logging the same bad object on every sync.
	lastProblems map[string]bool
	lastFailed   map[servicemap.FrontendKey]string
}

// Run syncs until ctx is done. Changes that arrive while a sync runs are
// folded into the next one, so a burst of API events costs one or two
// syncs, not one each.
func (a *Agent) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	changed := func() {
		a.Health.Queued(time.Now())
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	srcErr := make(chan error, 1)
	go func() { srcErr <- a.Source.Run(ctx, changed) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-kick:
			a.sync()
		}
	}
}

func (a *Agent) sync() {
	start := time.Now()
	in := a.Source.Snapshot()
	state, problems := servicemap.Build(in)
	a.reportProblems(problems)
	res := a.Datapath.Apply(state)
	a.reportFailures(res)
	d := time.Since(start)
	a.Health.Updated(time.Now())
	a.Metrics.observeSync(d, state, res, in)
	if res.Upserted > 0 || res.Removed > 0 || len(res.Failed) > 0 {
		a.Log.Info("synced", "frontends", len(state), "upserted", res.Upserted, "removed", res.Removed,
			"failed", len(res.Failed), "took", d)
	}
}

func (a *Agent) reportProblems(problems []servicemap.Problem) {
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		s := p.String()
		seen[s] = true
		if !a.lastProblems[s] {
			a.Log.Warn("skipping unusable object", "kind", p.Kind, "object", p.Object.String(), "reason", p.Reason)
		}
	}
	a.lastProblems = seen
	a.Metrics.setProblems(len(problems))
}

func (a *Agent) reportFailures(res datapath.ApplyResult) {
	now := make(map[servicemap.FrontendKey]string, len(res.Failed))
	for k, err := range res.Failed {
		now[k] = err.Error()
		if a.lastFailed[k] != err.Error() {
			a.Log.Error("frontend not programmed; the rest of the node is", "frontend", k.String(), "err", err)
		}
	}
	a.lastFailed = now
	a.Metrics.addFailures(len(res.Failed))
}
