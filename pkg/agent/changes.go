package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// versions identifies each object of a snapshot by UID and resourceVersion,
// so two snapshots can be compared without keeping the objects.
type versions struct {
	services map[types.NamespacedName]version
	slices   map[types.NamespacedName]version
}

// version holds the object's own strings, so taking it allocates nothing.
type version struct {
	uid types.UID
	rv  string
}

func versionsOf(in model.Input) versions {
	v := versions{
		services: make(map[types.NamespacedName]version, len(in.Services)),
		slices:   make(map[types.NamespacedName]version, len(in.Slices)),
	}
	for _, s := range in.Services {
		v.services[nameOf(s)] = versionOf(s)
	}
	for _, s := range in.Slices {
		v.slices[nameOf(s)] = versionOf(s)
	}
	return v
}

func nameOf(o metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

func versionOf(o metav1.Object) version {
	return version{uid: o.GetUID(), rv: o.GetResourceVersion()}
}

// changeCount is kube-proxy's service and endpoint change counts: objects
// added, changed or deleted between two snapshots.
type changeCount struct{ services, slices int }

func countChanges(old, cur versions) changeCount {
	return changeCount{services: diffCount(old.services, cur.services), slices: diffCount(old.slices, cur.slices)}
}

func diffCount(old, cur map[types.NamespacedName]version) int {
	n := 0
	for k, v := range cur {
		if ov, ok := old[k]; !ok || ov != v {
			n++
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok {
			n++
		}
	}
	return n
}

// triggerTimes returns, per Service, the last-change-trigger-time of each
// EndpointSlice added or changed since old, as kube-proxy's
// EndpointsChangeTracker collects them: only times after the agent started
// (older ones measure the agent's start, not the network), none for deleted
// slices (their annotation is from their last update), and none for slices
// without the annotation (not made by the EndpointSlice controller, or a
// change the controller does not time, such as a Service's own update).
func triggerTimes(in model.Input, old versions, started time.Time) map[types.NamespacedName][]time.Time {
	out := map[types.NamespacedName][]time.Time{}
	for _, s := range in.Slices {
		k := nameOf(s)
		if ov, ok := old.slices[k]; ok && ov == versionOf(s) {
			continue
		}
		t, ok := lastChangeTriggerTime(s)
		if !ok || !t.After(started) {
			continue
		}
		svc := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		out[svc] = append(out[svc], t)
	}
	return out
}

func lastChangeTriggerTime(s *discoveryv1.EndpointSlice) (time.Time, bool) {
	v, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
