package servicemap

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// backendSets is what one service port offers on one IP family, per kind of
// frontend and scope.
type backendSets struct {
	internal     []endpoint // ClusterIP frontends
	internalDrop bool       // ... which must fail with EHOSTUNREACH
	external     []endpoint // NodePort, ExternalIP and LoadBalancer frontends, ScopeAny
	// externalLocal is set only for externalTrafficPolicy Local: the
	// backends of the ScopeExternal twins of the external frontends.
	externalLocal []endpoint
	externalDrop  bool // ... which must drop the packet
	// serving is every serving endpoint, whatever the policies and
	// topology: sockets on one of them stay (see Frontend.Lingering).
	serving []Backend
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
// externalTrafficPolicy Local decides how packets from *other machines*
// reach NodePorts, externalIPs and LB IPs: only this node's endpoints (ready
// ones, else serving-and-terminating ones: CategorizeEndpoints'
// localEndpoints), so the client's source address survives, and DROP when
// the Service has usable endpoints but none here. Those go to the
// ScopeExternal twins of the external frontends. Traffic that starts on the
// node is exempt: kube-proxy's KUBE-EXT chain sends "pod traffic for ...
// external destinations" (local pod sources) and "route LOCAL traffic"
// (src-type LOCAL, the host) to the Cluster policy chain, "which simulates
// going up-and-out to an external load-balancer and coming back in", and
// UsesClusterEndpoints stays true for that reason even when both policies
// are Local (pkg/proxy/serviceport.go). The ScopeAny frontends, which serve
// the node's sockets, take that short-circuit: they keep the cluster-wide
// endpoints, topology included, and are never PolicyDrop, so a node with no
// local endpoint still answers its own pods, as with kube-proxy.
func selectBackends(candidates []endpoint, internalLocal, externalLocal bool, node nodeInfo) backendSets {
	cluster := clusterEndpoints(candidates, node)
	sets := backendSets{internal: cluster, external: cluster, serving: servingBackends(candidates)}
	if internalLocal || externalLocal {
		local := localEndpoints(candidates, node)
		drop := len(local) == 0 && hasUsableEndpoints(candidates)
		if internalLocal {
			sets.internal, sets.internalDrop = local, drop
		}
		if externalLocal {
			sets.externalLocal, sets.externalDrop = local, drop
		}
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

// externalPolicyLocal reads spec.externalTrafficPolicy; empty is the API's
// default, Cluster. Like kube-proxy (ExternalPolicyLocal in
// pkg/api/v1/service/util.go), Local counts only for a Service that is
// externally accessible by type: NodePort, LoadBalancer, or ClusterIP with
// externalIPs. A ClusterIP Service that merely carries load-balancer
// ingress IPs sends them to the cluster-wide endpoints.
func (b *builder) externalPolicyLocal(nn types.NamespacedName, spec *corev1.ServiceSpec) bool {
	switch spec.ExternalTrafficPolicy {
	case corev1.ServiceExternalTrafficPolicyLocal:
		switch spec.Type {
		case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			return true
		case "", corev1.ServiceTypeClusterIP:
			return len(spec.ExternalIPs) > 0
		}
		return false
	case "", corev1.ServiceExternalTrafficPolicyCluster:
		return false
	}
	// As for internalTrafficPolicy: Cluster keeps the Service reachable
	// from other machines; Local could strand them on a node without
	// endpoints.
	b.problem(model.KindService, nn, "spec.externalTrafficPolicy %q is not Cluster or Local; Cluster is used until it is fixed", spec.ExternalTrafficPolicy)
	return false
}
