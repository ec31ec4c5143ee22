package agent

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/source"
)

// processStart is as close to the process's start as Go code gets: the
// benchmark's full sync counts from the exec, before flags, pins and the
// datapath's load, all of which run after package initialisation.
var processStart = time.Now()

// freeOSMemory returns the first sync's garbage to the kernel; tests
// count its calls.
var freeOSMemory = debug.FreeOSMemory

// firstSync times the phases of the agent's first sync, for one log line
// that says where a slow start went: the informers' lists, the full
// rebuild of the Services, the map writes.
type firstSync struct {
	once     sync.Once
	listed   time.Time // the source's first changed(): caches synced
	rebuild  time.Duration
	apply    time.Duration
	reported bool
}

// sourceReady records the source's first changed() call. The kick that
// follows orders it before the sync loop reads it.
func (f *firstSync) sourceReady(now time.Time) {
	f.once.Do(func() { f.listed = now })
}

// logFirstSync writes the "first sync" line once, after the first sync
// that read everything (the first one always does).
func (a *Agent) logFirstSync(r round, res datapath.ApplyResult, done time.Time) {
	f := &a.first
	if !r.full {
		return
	}
	f.reported = true
	listed := f.listed
	if listed.IsZero() {
		listed = a.started
	}
	attrs := []any{"frontends", len(r.state), "upserted", res.Upserted, "batched", res.Batched,
		"failed", len(res.Failed),
		"informers_synced_after", listed.Sub(a.started)}
	// A source started beside the datapath's load may have synced before
	// Run: informers_synced_after is then only what Run still waited.
	if fc, ok := a.src.(source.FirstChanger); ok {
		if t := fc.FirstChange(); !t.IsZero() {
			attrs = append(attrs, "informers_synced_since_process_start", t.Sub(processStart))
		}
	}
	if res.BatchFallback != nil {
		attrs = append(attrs, "batch_fallback", res.BatchFallback.Error())
	}
	a.log.Info("first sync", append(attrs, "rebuild_took", f.rebuild, "apply_took", f.apply,
		"took", done.Sub(a.started), "since_process_start", done.Sub(processStart))...)
	// The start's burst (the LIST's decoded pages, the full rebuild's
	// intermediate maps, the batch fill's staging) is garbage now, but the
	// GC's heap goal (GOGC 100: twice the peak's live heap) keeps its pages
	// resident until the scavenger slowly returns them: at 10 000 Services
	// that is tens of MiB of RSS no steady state needs. One forced GC and
	// release, once: later syncs touch a Service each.
	freeOSMemory()
}
