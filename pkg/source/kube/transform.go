package kube

import (
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newTrim is the informers' transform: it drops, before an object enters
// the cache, the fields socklb never reads. managedFields alone is often
// the largest part of an object; a Service's last-applied-configuration
// annotation repeats the whole Service. What stays is what servicemap, the
// health checks and the change tracker read: names, the labels they read,
// specs but a Service's selector, a slice's endpoints and its
// last-change-trigger-time annotation, and of a Node what trimNode keeps
// (TestTrimKeepsWhatIsRead); the values every object repeats are shared
// (compact.go, TestTrimSharesRepeatedValues). It may see an object
// twice (client-go's DeltaFIFO hands a replaced object through again):
// trimming a trimmed object changes nothing.
func newTrim(nodeName string) func(obj any) (any, error) {
	in := newInterner()
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Service:
			trimMeta(&o.ObjectMeta)
			o.Annotations = nil
			compactService(o, in)
		case *discoveryv1.EndpointSlice:
			trimMeta(&o.ObjectMeta)
			if t, ok := o.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
				o.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: t}
			} else {
				o.Annotations = nil
			}
			compactSlice(o, in)
		case *corev1.Node:
			return trimNode(o, o.Name == nodeName), nil
		}
		return obj, nil
	}
}

// trimNode keeps of a Node what socklb reads: its name and addresses (where
// it serves NodePorts: servicemap.RemoteNodeAddresses), and, of this
// node's own, the zone label (topology hints) and the deletion timestamp
// and taints /healthz reads. A Node as the API serves it carries kilobytes
// of conditions, images and managed fields that kubelet rewrites at every
// status update; at 5000 nodes every agent would hold all of it. What
// stays is about 1 KiB a node, most of it the Go struct itself
// (unsafe.Sizeof(corev1.Node{}) is 784 bytes).
func trimNode(n *corev1.Node, this bool) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
	out.Status.Addresses = slices.Clip(n.Status.Addresses)
	if !this {
		return out
	}
	if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
		out.Labels = map[string]string{corev1.LabelTopologyZone: z}
	}
	out.DeletionTimestamp = n.DeletionTimestamp
	out.Spec.Taints = n.Spec.Taints
	return out
}

// sameNodeFacts compares what trimNode keeps, but the resourceVersion
// that changes with every write.
func sameNodeFacts(a, b *corev1.Node) bool {
	return a.Name == b.Name && a.UID == b.UID &&
		slices.Equal(a.Status.Addresses, b.Status.Addresses) &&
		maps.Equal(a.Labels, b.Labels) &&
		a.DeletionTimestamp.Equal(b.DeletionTimestamp) &&
		reflect.DeepEqual(a.Spec.Taints, b.Spec.Taints)
}
