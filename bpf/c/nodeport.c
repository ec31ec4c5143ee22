// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The per-packet path, on the node's devices (tcx ingress and egress): the
 * NodePort, LoadBalancer IP and externalIP packets that reach the node from
 * other machines, which no socket hook sees. kube-proxy DNATs them in
 * PREROUTING and masquerades them for externalTrafficPolicy Cluster; here
 * the backend comes from the same maps and the same policy (lb.h) as the
 * socket hooks', and flow.h keeps each flow on its backend.
 *
 * A flow to a backend on this node is only DNATed: the client's address is
 * kept (as Cilium does; kube-proxy masquerades it under the Cluster policy)
 * and the backend's reply, routed out through this device, is translated
 * back on egress. A flow to a backend on another node is SNATed to this
 * node's address on the device toward it, so the reply comes back here.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "extlb.h"
#include "flow.h"
#include "fwd.h"
#include "pkt.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* lb.h's view of the socket: packets have none, and their client is their
 * source address (LB_REQ_BY_ADDR), so these are never asked for. */
static __always_inline __u64 lb_sock_client(void *h, const struct lb_req *req) { return 0; }
static __always_inline struct sock_state *lb_sock_state_peek(void *h, const struct lb_req *req) { return NULL; }
static __always_inline struct sock_state *lb_sock_state_make(void *h, const struct lb_req *req) { return NULL; }

static __always_inline int drop(enum flow_event ev)
{
	flow_event(ev);
	return TC_ACT_SHOT;
}

/* send_orig rewrites a client's packet for its flow f and sends it on: to
 * the stack for a backend here, out the device toward another node when
 * SNATed. */
static __noinline int send_orig(struct __sk_buff *skb, struct pkt *p, const struct flow_value *f)
{
	struct fwd fw;

	if (pkt_set_addr(skb, p, 1, f->addr, f->port) < 0)
		return TC_ACT_SHOT;
	if (!(f->flags & FLOW_F_SNAT))
		return TC_ACT_OK;
	if (pkt_set_addr(skb, p, 0, f->nat_addr, f->nat_port) < 0)
		return TC_ACT_SHOT;
	fwd_lookup(skb, &fw, p, p->saddr, p->daddr, p->sport, p->dport, skb->ingress_ifindex);
	if (fwd_where(&fw) != FWD_DEVICE)
		return drop(FLOW_EV_NO_ROUTE);
	return fwd_redirect(skb, &fw);
}

/* send_reply rewrites a backend's reply to a SNATed flow, which came back
 * to the node's address, and sends it to the client. */
static __noinline int send_reply(struct __sk_buff *skb, struct pkt *p, const struct flow_value *r)
{
	struct fwd fw;

	if (pkt_set_addr(skb, p, 0, r->nat_addr, r->nat_port) < 0 || pkt_set_addr(skb, p, 1, r->addr, r->port) < 0)
		return TC_ACT_SHOT;
	fwd_lookup(skb, &fw, p, p->saddr, p->daddr, p->sport, p->dport, skb->ingress_ifindex);
	switch (fwd_where(&fw)) {
	case FWD_NONE:
		return drop(FLOW_EV_NO_ROUTE);
	case FWD_LOCAL:
		return TC_ACT_OK;
	default:
		return fwd_redirect(skb, &fw);
	}
}

/* still_member says whether f's backend is still one of its frontend's. A
 * UDP flow to a backend that left moves to a live one, as kube-proxy
 * clears a removed endpoint's UDP conntrack entries; a TCP flow stays, as
 * conntrack keeps it. */
static __always_inline int still_member(const struct flow_value *f)
{
	struct member_key mk = {};

	mk.svc_id = f->svc_id;
	mk.port = f->port;
	__builtin_memcpy(mk.addr, f->addr, 16);
	return bpf_map_lookup_elem(&members, &mk) != NULL;
}

/* start_flow serves the first packet of a flow to a frontend, or drops it
 * as kube-proxy would: a source outside loadBalancerSourceRanges, no
 * endpoint, or externalTrafficPolicy Local with none here. */
static __noinline int start_flow(struct __sk_buff *skb, struct pkt *p)
{
	struct lb_choice c = {};
	struct svc_key key;
	struct svc_value sv;
	struct flow_value *f;
	struct nat_dev *dev;
	const __u8 *snat = NULL;
	struct fwd fw;
	__u32 oif;

	if (!extlb_frontend(p, &key, &sv))
		return TC_ACT_OK;
	if (!extlb_src_allowed(&sv, p->saddr))
		return drop(FLOW_EV_SRC_RANGE);
	switch (extlb_choose(p, &key, &sv, &c)) {
	case LB_XLATED:
		break;
	case LB_UNREACH:
		return drop(FLOW_EV_POLICY_DROP);
	default:
		return drop(FLOW_EV_NO_ENDPOINT);
	}
	fwd_lookup(skb, &fw, p, p->saddr, c.be.addr, p->sport, c.be.port, skb->ingress_ifindex);
	switch (fwd_where(&fw)) {
	case FWD_NONE:
		return drop(FLOW_EV_NO_ROUTE);
	case FWD_DEVICE:
		oif = fw.fib.ifindex;
		dev = bpf_map_lookup_elem(&nat_devs, &oif);
		if (!dev)
			return drop(FLOW_EV_NO_ROUTE);
		snat = p->is6 ? dev->addr6 : dev->addr4;
		/* The device has no address of this family to SNAT to. */
		if (addr_is_unset(snat))
			return drop(FLOW_EV_NO_ROUTE);
		break;
	default:
		break;
	}
	f = flow_create(p, &c, sv.svc_id, snat, skb->ingress_ifindex);
	if (!f || f->dir != FLOW_ORIG)
		return TC_ACT_SHOT;
	lb_count(f->backend_id, LB_COUNT_CONNECT);
	return send_orig(skb, p, f);
}

SEC("tc")
int socklb_from_netdev(struct __sk_buff *skb)
{
	struct flow_value *f;
	struct pkt p;
	__u64 now;

	if (pkt_parse(skb, &p) != PKT_OK)
		return TC_ACT_OK;
	now = bpf_ktime_get_ns();
	f = flow_lookup(&p, now);
	if (!f)
		return start_flow(skb, &p);
	if (f->dir == FLOW_REPLY)
		return (f->flags & FLOW_F_SNAT) ? send_reply(skb, &p, f) : TC_ACT_OK;
	if (p.proto == IPPROTO_UDP && !still_member(f)) {
		struct flow_key k;

		flow_key_of(&k, &p);
		flow_forget(&k, f);
		return start_flow(skb, &p);
	}
	return send_orig(skb, &p, f);
}

/* A local backend's reply leaves through the device it would have left by
 * without socklb; its source goes back to the frontend the client asked. */
SEC("tc")
int socklb_to_netdev(struct __sk_buff *skb)
{
	struct flow_value *r;
	struct pkt p;

	if (pkt_parse(skb, &p) != PKT_OK)
		return TC_ACT_OK;
	r = flow_lookup(&p, bpf_ktime_get_ns());
	if (!r || r->dir != FLOW_REPLY || (r->flags & FLOW_F_SNAT))
		return TC_ACT_OK;
	if (pkt_set_addr(skb, &p, 0, r->nat_addr, r->nat_port) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
