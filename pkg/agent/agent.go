// Package agent wires a Source to the datapath: a change of the API
// objects recomputes the Services it touched (servicemap.Tracker) and
// writes only the frontends that changed; the first sync, node changes
// and an hourly resync rebuild everything. New builds its own
// kube-proxy-style health, Prometheus metrics and per-Service health
// checks; it is the one place that logs and counts the problems sources
// and servicemap find. It never touches the kernel itself: the datapath
// does, and host reads the node's facts.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/logkey"
	"github.com/socklb/socklb/pkg/model"
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

// Agent runs the sync loop. Build it with New.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	health  *Health
	metrics *Metrics
	// closeHealthChecks stops the health check server New made, if any.
	closeHealthChecks func()

	// tracker holds the desired state between syncs: a change costs the
	// Services it touched.
	tracker servicemap.Tracker
	// lastProblems avoids logging the same bad object on every sync.
	lastProblems map[model.Problem]bool
	lastFailed   map[servicemap.FrontendKey]string
	refused      admission   // Services the maps have no room for
	events       eventBudget // of the sync running
	// remote is the other nodes' NodePort addresses.
	remote remoteNodes
	// peers is the other Nodes' addresses, node facts of every sync.
	peers peers
	// lastAddrs is this node's interface addresses at the last sync.
	lastAddrs []netip.Addr

	// snapMu orders the snapshots taken to count pending changes with the
	// one each sync takes, so "pending" is always relative to what the last
	// sync read (kube-proxy's checkout of its change trackers). It also
	// guards src, which a scrape may read before Run sets it.
	snapMu  sync.Mutex
	src     source.Source
	seen    versions // what the last sync read
	started time.Time
	// triggers carries network programming start times of Services whose
	// frontends a sync failed to program, to be observed when one succeeds.
	triggers map[types.NamespacedName][]time.Time
	// afterSync, if set, is called at the end of each sync (tests).
	afterSync func(ok bool)
	first     firstSync
	// synced is set once the first sync is done: address events count
	// from then on (followAddresses).
	synced atomic.Bool
	// devices is what the per-packet path serves since the last
	// refreshDevices that succeeded (devicesOK).
	devices   []datapath.Device
	devicesOK bool
}

// Run syncs what src delivers until ctx is done. Changes that arrive while
// a sync runs are folded into the next one, so a burst of API events costs
// one or two syncs, not one each. Call it once.
func (a *Agent) Run(ctx context.Context, src source.Source) error {
	a.snapMu.Lock()
	a.src = src
	a.snapMu.Unlock()
	if a.closeHealthChecks != nil {
		defer a.closeHealthChecks()
	}
	if a.started.IsZero() {
		a.started = time.Now()
	}
	retryMin, retryMax := a.cfg.RetryMin, a.cfg.RetryMax
	if retryMin <= 0 {
		retryMin = DefaultRetryMin
	}
	if retryMax < retryMin {
		retryMax = max(DefaultRetryMax, retryMin)
	}
	kick := make(chan struct{}, 1)
	queue := func() {
		now := time.Now()
		a.health.Queued(now)
		a.metrics.queued(now)
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	changed := func() {
		a.first.sourceReady(time.Now())
		queue()
	}
	srcErr := make(chan error, 1)
	go func() { srcErr <- src.Run(ctx, changed) }()
	// The address subscription ends with Run, however Run ends.
	addrCtx, stopAddrs := context.WithCancel(ctx)
	var addrsDone sync.WaitGroup
	defer addrsDone.Wait()
	defer stopAddrs()
	if a.cfg.AddressEvents != nil {
		addrsDone.Go(func() { a.followAddresses(addrCtx, queue) })
	}
	if a.cfg.Pins != nil {
		go a.watchPins(ctx)
	}
	if a.cfg.Packets != nil {
		go a.sweepFlows(ctx)
	}
	var (
		retry   *time.Timer
		retryC  <-chan time.Time
		backoff = retryMin
	)
	period := a.cfg.ResyncPeriod
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
		a.log.Info("retrying the frontends that failed", "in", backoff)
		backoff = min(2*backoff, retryMax)
	}
}

// pendingChanges counts the objects changed since the last sync read them.
func (a *Agent) pendingChanges() changeCount {
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	if a.src == nil {
		return changeCount{}
	}
	if t, ok := a.src.(source.Tracked); ok {
		svcs, slices := t.Pending()
		return changeCount{services: svcs, slices: slices}
	}
	return countChanges(a.seen, versionsOf(a.src.Snapshot()))
}

// sync applies what changed (everything when full) and reports whether
// every frontend was programmed.
func (a *Agent) sync(full bool) bool {
	start := time.Now()
	r := a.read(full)
	refusedBefore := a.refused.services
	a.admit(&r)
	read := time.Now()
	a.metrics.checkedOut(r.changes)
	a.events = eventBudget{left: maxEventsPerSync}
	a.reportProblems(r.problems)
	a.reportRefusals(refusedBefore)
	addrsOK := a.setNodeAddresses()
	applyStart := time.Now()
	res := a.apply(r)
	applied := time.Now()
	a.reportFailures(r.state, res)
	a.eventsSkipped()
	done := time.Now()
	d := done.Sub(start)
	if !a.first.reported {
		a.first.rebuild, a.first.apply = read.Sub(start), applied.Sub(applyStart)
		a.logFirstSync(r, res, done)
	}

	if r.full || r.addrsChanged {
		a.refreshDevices()
	}
	a.cfg.HealthChecks.Sync(a.refused.checks(r.checks))
	a.observeProgramming(r.triggers, r.state, res, done)
	a.observeReceived(r.received, r.state, res, done)
	a.health.SyncNode(r.node)
	ok := len(res.Failed) == 0 && addrsOK
	if ok {
		a.health.Updated(start)
	} else {
		a.health.Failed(start)
	}
	a.metrics.observeSync(d, done, r.full, a.tracker.Totals(), r.state, res, a.tracker.Services(), a.refused.services)
	if r.full && full {
		a.log.Info("full resync", "frontends", len(r.state), "upserted", res.Upserted, "removed", res.Removed, "took", d)
	}
	if res.Upserted > 0 || res.Removed > 0 || len(res.Failed) > 0 {
		a.log.Info("synced", "frontends", len(r.state), "upserted", res.Upserted, "removed", res.Removed,
			"failed", len(res.Failed), "sockets_destroyed", res.SocketsDestroyed, "full", r.full, "took", d)
	}
	if sc := res.SocketScan; sc.SlowListing != nil {
		a.log.Warn("the task walk failed; this sync read /proc per process to find the namespaces whose sockets it walks", "err", sc.SlowListing, "listing", sc.Listing)
	} else if sc.Namespaces > 0 {
		// What finding a removed endpoint's sockets cost this sync: a
		// node with many processes or pods shows it here first.
		a.log.Debug("socket walk", "namespaces", sc.Namespaces, "listing", sc.Listing, "walk", sc.Walk)
	}
	if res.HookErr != nil {
		a.log.Warn("the egress hook stays attached", "err", res.HookErr)
	}
	if res.SocketErr != nil {
		a.log.Warn("destroying sockets of removed backends", "err", res.SocketErr)
	}
	if res.Switched != "" {
		a.log.Info("migration finished", "migration", res.Switched)
	}
	a.synced.Store(true)
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
	failed := failedServices(state, res)
	for svc, ts := range triggers {
		if _, refused := a.refused.services[svc]; refused {
			continue // not programmed, and not failing: nothing to time
		}
		if failed[svc] {
			if a.triggers == nil {
				a.triggers = map[types.NamespacedName][]time.Time{}
			}
			a.triggers[svc] = ts
			continue
		}
		for _, t := range ts {
			a.metrics.observeProgramming(done.Sub(t))
		}
	}
}

// observeReceived records the agent's own part of the programming latency:
// for every Service a change of which this sync read, the time from the
// first of those changes reaching the agent to now, when the maps hold it.
// Unlike observeProgramming it holds no API server and no controller, and
// it covers Service changes too. A Service whose frontend failed or was
// refused is not timed: its change is not in the maps.
func (a *Agent) observeReceived(received map[types.NamespacedName]time.Time, state servicemap.State, res datapath.ApplyResult, done time.Time) {
	if len(received) == 0 {
		return
	}
	failed := failedServices(state, res)
	for svc, t := range received {
		if _, refused := a.refused.services[svc]; refused || failed[svc] {
			continue
		}
		a.metrics.observeReceived(done.Sub(t))
	}
}

// failedServices are the Services with a frontend the sync failed to
// program.
func failedServices(state servicemap.State, res datapath.ApplyResult) map[types.NamespacedName]bool {
	failed := map[types.NamespacedName]bool{}
	for k := range res.Failed {
		if fe, ok := state[k]; ok {
			failed[fe.Service] = true
		}
	}
	return failed
}

func (a *Agent) reportFailures(state servicemap.State, res datapath.ApplyResult) {
	now := make(map[servicemap.FrontendKey]string, len(res.Failed))
	for k, err := range res.Failed {
		now[k] = err.Error()
		if a.lastFailed[k] != err.Error() {
			attrs := []any{logkey.Frontend(k)}
			if fe, ok := state[k]; ok {
				attrs = append(attrs, logkey.Service(fe.Service))
			}
			if me := (*datapath.MapError)(nil); errors.As(err, &me) {
				attrs = append(attrs, logkey.Map(me.Map))
			}
			a.log.Error("frontend not programmed; the rest of the node is", append(attrs, "err", err)...)
			if fe, ok := state[k]; ok {
				a.event(model.KindService, fe.Service, "FailedToProgram", "socklb on this node could not program "+k.String()+": "+err.Error())
			}
		}
	}
	a.lastFailed = now
	a.metrics.addFailures(len(res.Failed))
}
