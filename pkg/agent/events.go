package agent

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// maxEventsPerSync bounds the Events one sync records. Each becomes API
// requests (a create, then patches for its series) on a client of its own
// limited to 5 a second: a map too small for 100k Services would otherwise
// queue one per frontend, for hours. The log and metrics name every one.
const maxEventsPerSync = 10

type eventBudget struct{ left, skipped int }

// event records a Warning Event on kind/name while the sync's budget lasts.
// Called from the sync loop only.
func (a *Agent) event(kind model.Kind, name types.NamespacedName, reason, note string) {
	if a.cfg.Events == nil {
		return
	}
	if a.events.left == 0 {
		a.events.skipped++
		return
	}
	a.events.left--
	a.cfg.Events.Warn(kind, name, reason, note)
}

// eventsSkipped says how many Events the sync did not record.
func (a *Agent) eventsSkipped() {
	if a.events.skipped > 0 {
		a.log.Info("recorded only the first Events of this sync; the log above names every object", "max", maxEventsPerSync, "not_recorded", a.events.skipped)
	}
}
