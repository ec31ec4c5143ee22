package manifests

import (
	"fmt"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
)

// input merges every file's objects into one snapshot with fresh slices.
// Files are merged in name order and later definitions win, like applying
// the files one after the other with kubectl.
func (d *dirState) input(nodeName string) model.Input {
	names := make([]string, 0, len(d.files))
	for name := range d.files {
		names = append(names, name)
	}
	slices.Sort(names)

	svcs := newMerger[*corev1.Service](model.KindService, d.report)
	eps := newMerger[*discoveryv1.EndpointSlice](model.KindEndpointSlice, d.report)
	nodes := newMerger[*corev1.Node](model.KindNode, d.report)
	for _, name := range names {
		objs := d.files[name].objs
		path := filepath.Join(d.dir, name)
		svcs.add(path, objs.Services)
		eps.add(path, objs.Slices)
		nodes.add(path, objs.Nodes)
	}
	in := model.Input{
		Services: svcs.list(),
		Slices:   eps.list(),
		Nodes:    nodes.list(),
		NodeName: nodeName,
	}
	source.SortInput(&in)
	return in
}

// merger keeps the last definition of each object and reports the others.
type merger[T metav1.Object] struct {
	kind   model.Kind
	report func(model.Problem)
	objs   map[types.NamespacedName]T
	from   map[types.NamespacedName]string // file that defined it
}

func newMerger[T metav1.Object](kind model.Kind, report func(model.Problem)) *merger[T] {
	return &merger[T]{kind: kind, report: report, objs: map[types.NamespacedName]T{}, from: map[types.NamespacedName]string{}}
}

func (m *merger[T]) add(path string, objs []T) {
	for _, o := range objs {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		if prev, dup := m.from[key]; dup {
			where := fmt.Sprintf("in both %s and %s", prev, path)
			if prev == path {
				where = "twice in " + path
			}
			m.report(model.Problem{Kind: m.kind, Object: key, Reason: fmt.Sprintf("defined %s; using the last definition", where)})
		}
		m.objs[key] = o
		m.from[key] = path
	}
}

func (m *merger[T]) list() []T {
	out := make([]T, 0, len(m.objs))
	for _, o := range m.objs {
		out = append(out, o)
	}
	return out
}
