// Package agent wires a Source to the datapath: a change of the API
// objects recomputes the Services it touched (servicemap.Tracker) and
// writes only the frontends that changed; the first sync, node changes
// and an hourly resync rebuild everything. It also serves kube-proxy-style
// health and Prometheus metrics.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// Applier is the datapath as the agent sees it; tests fake it.
type Applier interface {
	Apply(servicemap.State) datapath.ApplyResult
}

// HealthCheckSyncer serves kube-proxy's per-Service health checks.
type HealthCheckSyncer interface {
	Sync([]servicemap.HealthCheck)
}

// Default backoff between retries of a sync that left frontends
// unprogrammed (a full map, say): the datapath keeps what it had for them,
// and the agent tries again without waiting for the next API change.
const (
	DefaultRetryMin = time.Second
	DefaultRetryMax = 30 * time.Second
)

// DefaultResyncPeriod is kube-proxy's FullSyncPeriod
// (pkg/proxy/util/utils.go): one hour.
const DefaultResyncPeriod = time.Hour

// Agent runs the sync loop.
type Agent struct {
	Source   source.Source
	Datapath Applier
	Log      *slog.Logger
	Health   *Health
	Metrics  *Metrics
	// HealthChecks, if set, gets the healthCheckNodePort listeners of
	// every sync (package healthcheck).
	HealthChecks HealthCheckSyncer

	// Pins, if set, is checked every PinCheckInterval (zero: the default).
	Pins             PinRepairer
	PinCheckInterval time.Duration

	// RetryMin and RetryMax bound the backoff of retries after a sync that
	// failed to program some frontend; zero means the defaults.
	RetryMin, RetryMax time.Duration

	// ResyncPeriod is the safety net of a full rebuild and diff of every
	// frontend, as kube-proxy's FullSyncPeriod; zero means the default.
	ResyncPeriod time.Duration

	// tracker holds the desired state between syncs: a change costs the
	// Services it touched.
	tracker servicemap.Tracker
	// lastProblems avoids logging the same bad object on every sync.
	lastProblems map[string]bool
	lastFailed   map[servicemap.FrontendKey]string

	// snapMu orders the snapshots taken to count pending changes with the
	// one each sync takes, so "pending" is always relative to what the last
	// sync read (kube-proxy's checkout of its change trackers).
	snapMu  sync.Mutex
	seen    versions // what the last sync read
	started time.Time
	// triggers carries network programming start times of Services whose
	// frontends a sync failed to program, to be observed when one succeeds.
	triggers map[types.NamespacedName][]time.Time
	// afterSync, if set, is called at the end of each sync (tests).
	afterSync func(ok bool)
}

// Run syncs until ctx is done. Changes that arrive while a sync runs are
// folded into the next one, so a burst of API events costs one or two
// syncs, not one each.
func (a *Agent) Run(ctx context.Context) error {
	if a.started.IsZero() {
		a.started = time.Now()
	}
	a.Health.countRequests(a.Metrics)
	retryMin, retryMax := a.RetryMin, a.RetryMax
	if retryMin <= 0 {
		retryMin = DefaultRetryMin
	}
	if retryMax < retryMin {
		retryMax = max(DefaultRetryMax, retryMin)
	}
	a.Metrics.setPending(a.pendingChanges)
	kick := make(chan struct{}, 1)
	changed := func() {
		now := time.Now()
		a.Health.Queued(now)
		a.Metrics.queued(now)
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	srcErr := make(chan error, 1)
	go func() { srcErr <- a.Source.Run(ctx, changed) }()
	if a.Pins != nil {
		go a.watchPins(ctx)
	}
	var (
		retry   *time.Timer
		retryC  <-chan time.Time
		backoff = retryMin
	)
	period := a.ResyncPeriod
	if period <= 0 {
		period = DefaultResyncPeriod
	}
	resync := time.NewTicker(period)
	defer resync.Stop()
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		full := false
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-kick:
		case <-retryC:
		case <-resync.C:
			full = true
		}
		if retry != nil {
			retry.Stop()
			retry, retryC = nil, nil
		}
		if a.sync(full) {
			backoff = retryMin
			continue
		}
		retry = time.NewTimer(backoff)
		retryC = retry.C
		a.Log.Info("retrying the frontends that failed", "in", backoff)
		backoff = min(2*backoff, retryMax)
	}
}

// pendingChanges counts the objects changed since the last sync read them.
func (a *Agent) pendingChanges() changeCount {
	if t, ok := a.Source.(source.Tracked); ok {
		svcs, slices := t.Pending()
		return changeCount{services: svcs, slices: slices}
	}
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	return countChanges(a.seen, versionsOf(a.Source.Snapshot()))
}

// sync applies what changed (everything when full) and reports whether
// every frontend was programmed.
func (a *Agent) sync(full bool) bool {
	start := time.Now()
	r := a.read(full)
	a.Metrics.checkedOut(r.changes)
	a.reportProblems(r.problems)
	res := a.apply(r)
	a.reportFailures(res)
	done := time.Now()
	d := done.Sub(start)

	if a.HealthChecks != nil {
		a.HealthChecks.Sync(r.checks)
	}
	a.observeProgramming(r.triggers, r.state, res, done)
	a.Health.SyncNode(r.node)
	ok := len(res.Failed) == 0
	if ok {
		a.Health.Updated(start)
	} else {
		a.Health.Failed(start)
	}
	a.Metrics.observeSync(d, done, r.full, a.tracker.Totals(), r.state, res, a.tracker.Services())
	if r.full && full {
		a.Log.Info("full resync", "frontends", len(r.state), "upserted", res.Upserted, "removed", res.Removed, "took", d)
	}
	if res.Upserted > 0 || res.Removed > 0 || len(res.Failed) > 0 {
		a.Log.Info("synced", "frontends", len(r.state), "upserted", res.Upserted, "removed", res.Removed,
			"failed", len(res.Failed), "sockets_destroyed", res.SocketsDestroyed, "full", r.full, "took", d)
	}
	if res.SocketErr != nil {
		a.Log.Warn("destroying sockets of removed backends", "err", res.SocketErr)
	}
	if a.afterSync != nil {
		a.afterSync(ok)
	}
	return ok
}

// observeProgramming records kube-proxy's network programming latency:
// for every EndpointSlice change this sync read, the time from the change
// (as the EndpointSlice controller stamped it) to now, when the maps hold
// it. Services with a frontend that failed keep their times for a later
// sync that succeeds.
func (a *Agent) observeProgramming(triggers map[types.NamespacedName][]time.Time, state servicemap.State, res datapath.ApplyResult, done time.Time) {
	for svc, ts := range a.triggers {
		triggers[svc] = append(triggers[svc], ts...)
	}
	a.triggers = nil
	if len(triggers) == 0 {
		return
	}
	failed := map[types.NamespacedName]bool{}
	for k := range res.Failed {
		if fe, ok := state[k]; ok {
			failed[fe.Service] = true
		}
	}
	for svc, ts := range triggers {
		if failed[svc] {
			if a.triggers == nil {
				a.triggers = map[types.NamespacedName][]time.Time{}
			}
			a.triggers[svc] = ts
			continue
		}
		for _, t := range ts {
			a.Metrics.observeProgramming(done.Sub(t))
		}
	}
}

func ownNode(in servicemap.Input) *corev1.Node {
	for _, n := range in.Nodes {
		if n.Name == in.NodeName {
			return n
		}
	}
	return nil
}

func (a *Agent) reportProblems(problems []servicemap.Problem) {
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		s := p.String()
		seen[s] = true
		if !a.lastProblems[s] {
			a.Log.Warn("skipping unusable object", "kind", p.Kind, "object", p.ObjectName(), "reason", p.Reason)
		}
	}
	a.lastProblems = seen
	a.Metrics.setProblems(problems)
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
