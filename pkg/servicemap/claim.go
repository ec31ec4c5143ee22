package servicemap

import (
	"fmt"

	"github.com/socklb/socklb/pkg/model"
)

// offer is a frontend a Service asks for; claimAll decides who gets a key
// that several ask for.
type offer struct {
	fe    Frontend
	label string // the service port, for messages
	// twin is fe's ScopeExternal twin (externalTrafficPolicy Local), or
	// nil. It is never claimed on its own: it exists exactly when fe wins
	// its key, so packets from other machines and sockets on the node
	// always meet the same Service at one address and port.
	twin *Frontend
	// shadow marks a NodePort's claim of one node address: the frontend
	// at the unspecified address serves it (addNodePort), so a shadow
	// that wins holds nothing, but one that loses to another Service's
	// frontend there is reported, as a NodePort of its own would be.
	shadow bool
}

// claimRank orders the kinds when several Services ask for one key.
//
// NodePorts come last, as in kube-proxy's iptables mode
// (pkg/proxy/iptables/proxier.go): KUBE-SERVICES holds the cluster IP,
// externalIP and load-balancer rules, and its last rule jumps to
// KUBE-NODEPORTS ("this must be the last rule in this chain"), so any of
// them that matches a node address and port wins over a NodePort there.
//
// Among the kinds of KUBE-SERVICES iptables mode has no order to follow:
// it writes each Service's rules (cluster IP, then externalIPs, then
// load-balancer IPs) in Go map order, which changes from sync to sync, so
// a collision between two Services goes one way or the other at random.
// socklb must be deterministic, and orders them by how much their address
// can be trusted to be the Service's: cluster IPs are allocated, uniquely,
// by the API server; load-balancer IPs by a controller; externalIPs are
// written by whoever may create a Service, so an externalIP never takes
// another Service's cluster IP (CVE-2020-8554). One Service's own rules
// keep iptables' order: its cluster IP wins over its own externalIPs.
func claimRank(k Kind) int {
	switch k {
	case KindClusterIP:
		return 0
	case KindLoadBalancer:
		return 1
	case KindExternalIP:
		return 2
	}
	return maxClaimRank
}

const maxClaimRank = 3

// claimAll hands each key to its first claimant in (rank, namespace/name)
// order. Offers arrive in namespace/name order (Build sorts the Services).
func (b *builder) claimAll(offers []offer) {
	owner := make(map[FrontendKey]offer, len(offers))
	// One pass per rank keeps each rank in namespace/name order, as a
	// stable sort by rank would, in linear time.
	for rank := 0; rank <= maxClaimRank; rank++ {
		for _, o := range offers {
			if claimRank(o.fe.Kind) == rank {
				b.claim(owner, o)
			}
		}
	}
}

// claim gives o's key to o unless an earlier offer holds it.
func (b *builder) claim(owner map[FrontendKey]offer, o offer) {
	prev, taken := owner[o.fe.Key]
	if !taken {
		owner[o.fe.Key] = o
		if o.shadow {
			return
		}
		b.state[o.fe.Key] = o.fe
		if o.twin != nil {
			b.state[o.twin.Key] = *o.twin
		}
		return
	}
	if p, ok := lostClaim(prev, o); ok {
		b.problems = append(b.problems, p)
	}
}

// lostClaim is the model.Problem of offer o, which lost its key to prev; ok is
// false when losing costs nothing (one service port's external frontends).
func lostClaim(prev, o offer) (model.Problem, bool) {
	if sameServicePort(prev, o) && prev.fe.Kind != KindClusterIP && o.fe.Kind != KindClusterIP {
		// Say an LB IP also listed in externalIPs: both are external
		// frontends of one service port, with the same backends, so
		// nothing is lost and nothing needs fixing.
		return model.Problem{}, false
	}
	why := "as the smaller namespace/name"
	if prev.fe.Kind != o.fe.Kind {
		why = "because " + prev.fe.Kind.String() + " frontends take precedence over " + o.fe.Kind.String() + " ones"
	} else if prev.fe.Service == o.fe.Service {
		why = "as the earlier port"
	}
	return model.Problem{Kind: model.KindService, Object: o.fe.Service, Reason: fmt.Sprintf("%s (%s, port %s) is also claimed by Service %s port %s (%s), which wins %s; this frontend is ignored, change the address or port of one of them",
		o.fe.Key, o.fe.Kind, o.label, prev.fe.Service, prev.label, prev.fe.Kind, why)}, true
}

func sameServicePort(x, y offer) bool {
	return x.fe.Service == y.fe.Service && x.fe.PortName == y.fe.PortName && x.label == y.label
}
