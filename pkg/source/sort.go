package source

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/pkg/model"
)

// SortInput orders every list in in by namespace, then name. Sources read
// from maps (informer caches, merged files), and a stable order keeps logs,
// diffs and tests deterministic. It sorts in place: call it only on slices
// the source has just built.
func SortInput(in *model.Input) {
	sortObjects(in.Services)
	sortObjects(in.Slices)
	sortObjects(in.Nodes)
}

func sortObjects[T metav1.Object](objs []T) {
	slices.SortFunc(objs, func(a, b T) int {
		return cmp.Or(
			cmp.Compare(a.GetNamespace(), b.GetNamespace()),
			cmp.Compare(a.GetName(), b.GetName()),
		)
	})
}
