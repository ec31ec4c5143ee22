package servicemap

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// Problems is every problem of the current state, as Build reports them.
// It is assembled again only after a change touched a Service that has or
// had problems, from those Services alone: bad input is rare, so this
// stays small at any N. The caller must not modify the result.
func (t *Tracker) Problems() []model.Problem {
	if !t.problemsOld {
		return t.problems
	}
	ps := slices.Clone(t.nodeProblems)
	for _, nn := range sortedNames(t.withProblems) {
		e := t.entries[nn]
		ps = append(ps, e.problems...)
		// claimAll reports losers rank by rank, each rank in offer order.
		idx := make([]int, 0, len(e.lost))
		for i := range e.lost {
			idx = append(idx, i)
		}
		slices.SortFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(claimRank(e.offers[a].fe.Kind), claimRank(e.offers[b].fe.Kind)), cmp.Compare(a, b))
		})
		for _, i := range idx {
			ps = append(ps, e.lost[i])
		}
	}
	t.problems, t.problemsOld = sortProblems(ps), false
	return t.problems
}

// HealthChecks is HealthChecks of the current objects, assembled again
// only when a Service with a health check changed.
func (t *Tracker) HealthChecks() []HealthCheck {
	if !t.checksOld {
		return t.checks
	}
	var out []HealthCheck
	for _, nn := range sortedNames(t.withChecks) {
		out = append(out, t.entries[nn].checks...)
	}
	slices.SortFunc(out, compareHealthCheck)
	t.checks, t.checksOld = out, false
	return out
}

func sortedNames(set map[types.NamespacedName]bool) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(set))
	for nn := range set {
		out = append(out, nn)
	}
	slices.SortFunc(out, compareNN)
	return out
}
