package servicemap

import "slices"

// This file mirrors kube-proxy's CategorizeEndpoints and topologyModeFromHints
// (kubernetes/kubernetes pkg/proxy/topology.go, v1.34 and later, with the
// PreferSameTrafficDistribution gate on, as it is by default since v1.34),
// for one service port and one IP family, as kube-proxy runs one proxier
// per family.
// Keeping its shape makes a difference from kube-proxy easy to spot.
//
// Topology is read from EndpointSlice hints only, never from the Service's
// spec.trafficDistribution: kube-proxy does the same, because the
// EndpointSlice controller is what turns trafficDistribution into hints
// (PreferSameNode: forNodes and forZones; PreferSameZone and its old name
// PreferClose: forZones), and it withholds them when they would overload a
// zone. Hints written by other controllers (the topology-mode annotation)
// are honoured for the same reason.

// topologyMode says which hints narrow the ready endpoints.
type topologyMode uint8

const (
	topologyAll topologyMode = iota // no usable hints: every ready endpoint
	topologySameZone
	topologySameNode
)

// clusterEndpoints is the "Cluster" half of CategorizeEndpoints: the ready
// endpoints the hints leave, or, when nothing anywhere is ready, every
// serving-and-terminating endpoint (KEP-1669). Hints never narrow the
// terminating fallback: when nothing is ready, topology has nothing to
// prefer among, exactly as in kube-proxy.
func clusterEndpoints(eps []endpoint, node nodeInfo) []endpoint {
	mode := topologyModeFromHints(eps, node)
	out := filterEndpoints(eps, func(e endpoint) bool { return e.ready && availableForTopology(e, mode, node) })
	if len(out) == 0 {
		out = filterEndpoints(eps, func(e endpoint) bool { return e.serving && e.terminating })
	}
	return out
}

// localEndpoints is the "Local" half: this node's ready endpoints, or, when
// none of them is ready, this node's serving-and-terminating ones. The
// fallback looks at local endpoints only, so a ready remote endpoint never
// hides a draining local one, and topology is not consulted: Local already
// is the narrowest topology there is.
func localEndpoints(eps []endpoint, node nodeInfo) []endpoint {
	out := filterEndpoints(eps, func(e endpoint) bool { return e.isLocal(node) && e.ready })
	if len(out) == 0 {
		out = filterEndpoints(eps, func(e endpoint) bool { return e.isLocal(node) && e.serving && e.terminating })
	}
	return out
}

// hasUsableEndpoints is CategorizeEndpoints' hasAnyEndpoints: is any endpoint,
// on any node, one that a Cluster policy would use? It separates "nothing
// serves this Service" (REJECT) from "something does, but not here" (DROP).
func hasUsableEndpoints(eps []endpoint) bool {
	return slices.ContainsFunc(eps, func(e endpoint) bool { return e.ready || (e.serving && e.terminating) })
}

// topologyModeFromHints: node hints win when every ready endpoint has one and
// at least one names this node; otherwise zone hints, on the same two
// conditions for this node's zone; otherwise no topology. Checking "every
// ready endpoint" guards against a half-updated set of slices, checking
// "at least one for us" against a node the controller did not plan for.
//
// One deliberate difference: a node without a name or without a zone label
// matches no hint, even a hint naming "" (the API accepts an empty zone
// name). kube-proxy would match "" against "" and route a zoneless node to
// whatever endpoints carry the empty hint.
func topologyModeFromHints(eps []endpoint, node nodeInfo) topologyMode {
	anyReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, e := range eps {
		if !e.ready {
			continue
		}
		anyReady = true
		if len(e.nodeHints) == 0 {
			allNode = false
		} else if hintsName(e.nodeHints, node.name) {
			forNode = true
		}
		if len(e.zoneHints) == 0 {
			allZone = false
		} else if hintsName(e.zoneHints, node.zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return topologyAll
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyAll
}

// availableForTopology applies a mode already chosen; the fallback happened
// when choosing it, so there is none here.
func availableForTopology(e endpoint, mode topologyMode, node nodeInfo) bool {
	switch mode {
	case topologySameNode:
		return hintsName(e.nodeHints, node.name)
	case topologySameZone:
		return hintsName(e.zoneHints, node.zone)
	}
	return true
}

func hintsName(hints []string, name string) bool {
	return name != "" && slices.Contains(hints, name)
}

func filterEndpoints(eps []endpoint, keep func(endpoint) bool) []endpoint {
	var out []endpoint
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
