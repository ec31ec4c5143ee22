/* Which frontend a packet from another machine is for and which backend
 * serves it: lb.h's policy, with the client known by its address instead of
 * its network namespace.
 */
#ifndef SOCKLB_EXTLB_H
#define SOCKLB_EXTLB_H

#include "lb.h"
#include "pkt.h"

/* extlb_frontend finds the frontend p is for, copied to sv with its key:
 * its address's own, else, at one of this node's NodePort addresses, the
 * NodePort's (lb_nodeport; another node's address is not this node's to
 * serve). A Service with externalTrafficPolicy Local has a second entry
 * for such packets (SVC_SCOPE_EXTERNAL), looked up only once the common
 * one matched, so a packet for no Service costs one lookup, or three when
 * it is for a node address. ClusterIPs are not served from outside, as
 * Cilium's default: only a router that sends the Service CIDR to a node
 * would need it. */
static __always_inline int extlb_frontend(const struct pkt *p, struct svc_key *key, struct svc_value *sv)
{
	__builtin_memset(key, 0, sizeof(*key));
	__builtin_memcpy(key->addr, p->daddr, 16);
	key->port = p->dport;
	key->proto = p->proto;
	if (lb_service(key, sv)) {
		if (sv->kind == SVC_KIND_CLUSTER_IP)
			return 0;
	} else {
		__u32 node = addr_is_unset(key->addr) ? 0 : lb_node_addr(key->addr);

		if (!(node & NODE_ADDR_LOCAL) || !lb_nodeport(key, sv, node))
			return 0;
	}
	key->scope = SVC_SCOPE_EXTERNAL;
	if (lb_service(key, sv))
		return 1;
	key->scope = SVC_SCOPE_ANY;
	return lb_service(key, sv);
}

/* extlb_choose picks p's backend of the frontend key (sv), with
 * sessionAffinity by p's source address. */
static __noinline int extlb_choose(const struct pkt *p, const struct svc_key *key, struct svc_value *sv,
					struct lb_choice *c)
{
	struct lb_req req = {};

	req.flags = LB_REQ_BY_ADDR;
	__builtin_memcpy(req.src, p->saddr, 16);
	return lb_choose(key, sv, &req, NULL, NULL, c);
}

#endif
