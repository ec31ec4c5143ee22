package servicemap

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// backendSets is what one service port offers on one IP family, per kind of
// frontend.
type backendSets struct {
	internal     []endpoint // ClusterIP frontends
	internalDrop bool       // ... which must fail with EHOSTUNREACH
	external     []endpoint // NodePort, ExternalIP and LoadBalancer frontends
}

// selectBackends applies the traffic policies to one service port's
// candidate endpoints of one family.
//
// internalTrafficPolicy Local: ClusterIP frontends use this node's endpoints
// only, never a remote one, and no topology (kube-proxy's localEndpoints).
// When the Service has usable endpoints but none here, kube-proxy DROPs; the
// frontend gets PolicyDrop, so connect() fails with EHOSTUNREACH rather than
// hanging until a timeout as a dropped SYN would. With no usable endpoint
// anywhere it is REJECT, as for any Service: ECONNREFUSED.
//
// externalTrafficPolicy Local has no effect here, by design. It decides how
// traffic from *outside* the node reaches NodePorts, externalIPs and LB IPs.
// kube-proxy exempts traffic that starts on the node: its KUBE-EXT chain
// sends "pod traffic for ... external destinations" (local pod sources) and
// "route LOCAL traffic" (src-type LOCAL, the host) to the Cluster policy
// chain, "which simulates going up-and-out to an external load-balancer and
// coming back in", and UsesClusterEndpoints stays true for that reason even
// when both policies are Local (pkg/proxy/serviceport.go). A socket hook
// only ever sees traffic that starts on the node (its own processes and
// pods), so socklb always takes that short-circuit: external frontends use
// the cluster-wide endpoints, topology included, and are never PolicyDrop.
// A node with no local endpoint still answers its own pods, as with
// kube-proxy, instead of failing connections kube-proxy would have carried.
func selectBackends(candidates []endpoint, internalLocal bool, node nodeInfo) backendSets {
	cluster := clusterEndpoints(candidates, node)
	sets := backendSets{internal: cluster, external: cluster}
	if internalLocal {
		sets.internal = localEndpoints(candidates, node)
		sets.internalDrop = len(sets.internal) == 0 && hasUsableEndpoints(candidates)
	}
	return sets
}

// internalPolicyLocal reads spec.internalTrafficPolicy; nil is the API's
// default, Cluster.
func (b *builder) internalPolicyLocal(nn types.NamespacedName, spec *corev1.ServiceSpec) bool {
	p := spec.InternalTrafficPolicy
	if p == nil {
		return false
	}
	switch *p {
	case corev1.ServiceInternalTrafficPolicyLocal:
		return true
	case corev1.ServiceInternalTrafficPolicyCluster, "":
		return false
	}
	// Falling back to Cluster keeps the Service reachable; falling back to
	// Local could strand every client of a node without endpoints.
	b.problem(model.KindService, nn, "spec.internalTrafficPolicy %q is not Cluster or Local; Cluster is used until it is fixed", *p)
	return false
}

// checkExternalPolicy only validates spec.externalTrafficPolicy, so that a
// typo is reported even though, at the socket layer, the value changes
// nothing (see selectBackends).
func (b *builder) checkExternalPolicy(nn types.NamespacedName, spec *corev1.ServiceSpec) {
	switch spec.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
		return
	}
	b.problem(model.KindService, nn, "spec.externalTrafficPolicy %q is not Cluster or Local; it is ignored (socklb treats traffic from the node as kube-proxy does: cluster-wide endpoints)", spec.ExternalTrafficPolicy)
}
