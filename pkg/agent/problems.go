package agent

import (
	"log/slog"

	"github.com/socklb/socklb/pkg/logkey"
	"github.com/socklb/socklb/pkg/model"
)

// Report takes a problem a source found while reading (a file that does
// not parse, a watch the API server refuses): a model.ReportFunc. Sources
// call it from their own goroutines; it only logs and counts.
func (a *Agent) Report(p model.Problem) {
	a.logProblem(p)
}

// reportProblems takes the problems of one build: each is logged once, when
// it first appears, and the last build's set is what socklb_unusable_objects
// shows.
func (a *Agent) reportProblems(problems []model.Problem) {
	seen := make(map[model.Problem]bool, len(problems))
	for _, p := range problems {
		seen[p] = true
		if !a.lastProblems[p] {
			a.logProblem(p)
			a.event(p.Kind, p.Object, "UnusableInput", "socklb skips it: "+p.Reason)
		}
	}
	a.lastProblems = seen
	a.metrics.setProblems(problems)
}

// logProblem is the one place a problem is logged and counted, whichever
// layer found it, so an operator greps one message and reads one metric.
func (a *Agent) logProblem(p model.Problem) {
	a.log.Warn("skipping unusable input", problemObject(p), "kind", string(p.Kind), "reason", p.Reason)
	a.metrics.problemLogged(p.Kind)
}

// problemObject names the object under its kind's key (package logkey).
func problemObject(p model.Problem) slog.Attr {
	switch p.Kind {
	case model.KindService:
		return logkey.Service(p.Object)
	case model.KindEndpointSlice:
		return logkey.EndpointSlice(p.Object)
	case model.KindNode:
		return logkey.Node(p.Object.Name)
	case model.KindFile:
		return slog.String("file", p.Object.Name)
	case model.KindWatch:
		return slog.String("resource", p.Object.Name)
	}
	return slog.String("object", p.ObjectName())
}
