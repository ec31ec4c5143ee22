package source

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Tracked is a Source that records which Services its events touched, so
// the agent recomputes those alone (kube-proxy's ServiceChangeTracker and
// EndpointsChangeTracker: pending changes per object key, checked out by
// each sync). An EndpointSlice belongs to the Service its
// kubernetes.io/service-name label names; a slice whose label changes
// touches both Services.
type Tracked interface {
	Source
	// Checkout returns what changed since the previous Checkout and
	// forgets it. Call it before reading the objects: a change that lands
	// after Checkout is then in the next one, never lost.
	Checkout() Changes
	// Pending counts the Services and EndpointSlices changed since the
	// last Checkout, without forgetting them.
	Pending() (services, slices int)
	// ServiceObjects returns the Service named nn (nil when it is absent
	// or not proxied) and the EndpointSlices labelled with its name, as
	// the caches hold them now. A name with an empty Name is the
	// namespace's slices that lack the label.
	ServiceObjects(nn types.NamespacedName) servicemap.ServiceObjects
	// NodeInput is Snapshot without Services and Slices and without the
	// other Nodes: the node facts the source holds, read at every
	// Service change, so it must not list thousands of Nodes.
	NodeInput() model.Input
	// Nodes is every Node the source holds, this node's included: what
	// servicemap.RemoteNodeAddresses and servicemap.PeerAddresses read.
	// Read it when Changes.RemoteNodes says they changed; the agent does
	// not need it per Service change.
	Nodes() []*corev1.Node
}

// Changes is one checkout.
type Changes struct {
	// Services are the names whose Service or EndpointSlices changed.
	Services map[types.NamespacedName]bool
	// Triggers holds, per Service, the endpoints.kubernetes.io/
	// last-change-trigger-time of each EndpointSlice added or updated.
	Triggers map[types.NamespacedName][]time.Time
	// Node is true when this node's Node object changed what socklb
	// reads of it: the node facts every Service reads, so a full rebuild.
	Node bool
	// RemoteNodes is true when another Node was added or removed, or its
	// addresses changed: where other nodes serve NodePorts
	// (servicemap.RemoteNodeAddresses) and their addresses as externalIPs
	// this node may capture (servicemap.PeerAddresses, a node fact of
	// every Service with externalIPs) need computing again.
	RemoteNodes bool
	// ServiceObjects and SliceObjects count the objects changed, as
	// kube-proxy's *_changes_total count them.
	ServiceObjects, SliceObjects int
	// Received holds, per Service in Services, when the first of its
	// changes in this checkout reached the agent (the informer handler
	// ran): the start of the agent's own part of the programming latency,
	// whatever the API server and the EndpointSlice controller took.
	Received map[types.NamespacedName]time.Time
}
