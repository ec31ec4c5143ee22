package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// trim is the informers' transform: it drops, before an object enters the
// cache, the fields socklb never reads. managedFields alone is often the
// largest part of an object; a Service's last-applied-configuration
// annotation repeats the whole Service; a Node's status.images lists every
// image it holds. What stays is what servicemap, the health checks and
// the change tracker read: names, labels, specs, a slice's endpoints and
// its last-change-trigger-time annotation, a Node's labels, taints,
// addresses and deletion timestamp (TestTrimKeepsWhatIsRead).
func trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		o.ManagedFields = nil
		o.Annotations = nil
	case *discoveryv1.EndpointSlice:
		o.ManagedFields = nil
		if t, ok := o.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
			o.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: t}
		} else {
			o.Annotations = nil
		}
		trimEndpoints(o)
	case *corev1.Node:
		o.ManagedFields = nil
		o.Annotations = nil
		o.Status.Images = nil
		o.Status.VolumesInUse = nil
		o.Status.VolumesAttached = nil
	}
	return obj, nil
}

// trimEndpoints drops the endpoint fields servicemap never reads (the
// Pod reference, hostname, deprecated topology: a targetRef alone is seven
// strings per endpoint) and the spare capacity the decoder's appends left
// (a slice of 10 endpoints holds an array of 16), which at 10 000 slices
// was a third of the informer cache's largest allocation.
func trimEndpoints(o *discoveryv1.EndpointSlice) {
	for i := range o.Endpoints {
		e := &o.Endpoints[i]
		e.TargetRef = nil
		e.Hostname = nil
		e.DeprecatedTopology = nil
	}
	if cap(o.Endpoints) > len(o.Endpoints) {
		o.Endpoints = slices.Clone(o.Endpoints)
	}
}
