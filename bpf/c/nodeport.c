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
#include "frag.h"
#include "fwd.h"
#include "icmp.h"
#include "pkt.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* lb.h's view of the socket: packets have none, and their client is their
 * source address (LB_REQ_BY_ADDR), so these are never asked for. */
static __always_inline __u64 lb_sock_client(void *h, const struct lb_req *req) { return 0; }
static __always_inline struct sock_state *lb_sock_state_peek(void *h, const struct lb_req *req) { return NULL; }
static __always_inline struct sock_state *lb_sock_state_make(void *h, const struct lb_req *req) { return NULL; }
static __always_inline __u64 lb_sock_cookie(void *h, const struct lb_req *req) { return 0; }
static __always_inline __u64 lb_sock_cookie_peek(void *h, const struct lb_req *req) { return 0; }

static __always_inline int drop(enum flow_event ev)
{
	flow_event(ev);
	return TC_ACT_SHOT;
}

/* forward sends a packet where the FIB lookup fw says: this node's stack
 * for a local destination, else out the device it names. */
static __always_inline int forward(struct __sk_buff *skb, const struct fwd *fw)
{
	switch (fwd_where(fw)) {
	case FWD_NONE:
		return drop(FLOW_EV_NO_ROUTE);
	case FWD_LOCAL:
		return TC_ACT_OK;
	default:
		return fwd_redirect(skb, fw);
	}
}

/* send_orig rewrites a client's packet for its flow f and sends it on: to
 * the stack for a backend here, out the device toward another node when
 * SNATed. */
static __noinline int send_orig(struct __sk_buff *skb, struct pkt *p, const struct flow_value *f)
{
	struct fwd fw;

	if (pkt_set_addr(skb, p, 1, A16(f->addr), f->port) < 0)
		return TC_ACT_SHOT;
	if (!(f->flags & FLOW_F_SNAT))
		return TC_ACT_OK;
	if (pkt_set_addr(skb, p, 0, A16(f->nat_addr), f->nat_port) < 0)
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

	if (pkt_set_addr(skb, p, 0, A16(r->nat_addr), r->nat_port) < 0 || pkt_set_addr(skb, p, 1, A16(r->addr), r->port) < 0)
		return TC_ACT_SHOT;
	fwd_lookup(skb, &fw, p, p->saddr, p->daddr, p->sport, p->dport, skb->ingress_ifindex);
	return forward(skb, &fw);
}

/* still_member says whether f's backend is still one of its frontend's. A
 * UDP flow to a backend that left moves to a live one, as kube-proxy
 * clears a removed endpoint's UDP conntrack entries; a TCP flow stays, as
 * conntrack keeps it. */
static __noinline int still_member(const struct flow_value *f)
{
	struct member_key mk = {};

	mk.svc_id = f->svc_id;
	mk.port = f->port;
	__builtin_memcpy(mk.addr, f->addr, 16);
	return bpf_map_lookup_elem(&members, &mk) != NULL;
}

/* start_flow starts the flow of the first packet to a frontend, returning
 * FLOW_STARTED, or answers it as kube-proxy would: a source outside
 * loadBalancerSourceRanges or externalTrafficPolicy Local with no endpoint
 * here is dropped, a Service without endpoints rejected, anything else is
 * left to the stack. The caller sends the packet on its new flow: with the
 * verifier's 512 bytes for a whole call chain, sending from here would not
 * fit. */
#define FLOW_STARTED -1

/* snat_toward says where the FIB sends p once DNATed to be: to this node
 * (a local pod, or the node itself: only DNAT), or out through a device
 * toward another node, whose address the flow is then SNATed to (*snat). */
static __noinline enum fwd_where snat_toward(struct __sk_buff *skb, const struct pkt *p, const struct backend *be,
					     const __u8 **snat)
{
	enum fwd_where where;
	struct nat_dev *dev;
	struct fwd fw;
	__u32 oif;

	fwd_lookup(skb, &fw, p, p->saddr, be->addr, p->sport, be->port, skb->ingress_ifindex);
	where = fwd_where(&fw);
	if (where != FWD_DEVICE)
		return where;
	oif = fw.fib.ifindex;
	dev = bpf_map_lookup_elem(&nat_devs, &oif);
	if (!dev)
		return FWD_NONE;
	*snat = p->is6 ? dev->addr6 : dev->addr4;
	return FWD_DEVICE;
}

__noinline int start_flow(struct __sk_buff *skb, struct pkt *p)
{
	struct lb_choice c = {};
	struct svc_key key;
	struct svc_value sv;
	struct flow_value *f;
	const __u8 *snat = NULL;

	if (!skb || !p || !extlb_frontend(p, &key, &sv))
		return TC_ACT_OK;
	if (!lb_src_allowed(&sv, p->saddr))
		return drop(FLOW_EV_SRC_RANGE);
	switch (extlb_choose(p, &key, &sv, &c)) {
	case LB_XLATED:
		break;
	case LB_UNREACH:
		/* externalTrafficPolicy Local, no endpoint here: kube-proxy
		 * DROPs, and so the healthCheckNodePort answers 503. */
		return drop(FLOW_EV_POLICY_DROP);
	default:
		flow_event(FLOW_EV_NO_ENDPOINT);
		return icmp_reject(skb, p);
	}
	switch (snat_toward(skb, p, &c.be, &snat)) {
	case FWD_NONE:
		return drop(FLOW_EV_NO_ROUTE);
	case FWD_DEVICE:
		/* The device has no address of this family to SNAT to. */
		if (!snat || addr_is_unset(snat))
			return drop(FLOW_EV_NO_ROUTE);
		break;
	default:
		snat = NULL;
	}
	f = flow_create(skb, p, &c, sv.svc_id, snat);
	if (!f || f->dir != FLOW_ORIG)
		return TC_ACT_SHOT;
	lb_count(f->backend_id, LB_COUNT_CONNECT);
	return FLOW_STARTED;
}

/* end_flow removes p's flow f (a UDP flow whose backend left, to move it
 * to a live one). */
static __noinline void end_flow(struct pkt *p, struct flow_value *f)
{
	struct flow_key k;

	flow_key_of(&k, p);
	flow_forget(&k, f);
}

/* icmp_from_netdev translates an ICMP error that arrived about a flow:
 * from the backend's side about a SNATed packet (q was node:port ->
 * backend), it goes to the client as if about the packet the client sent;
 * from the client's side about a reply (q was frontend -> client), it goes
 * to the backend as if about the packet the backend sent. */
__noinline int icmp_from_netdev(struct __sk_buff *skb, struct pkt *outer)
{
	struct flow_value *f;
	struct pkt qp, *q = &qp;
	__u8 peer[16];
	struct fwd fw;
	int snat;

	if (!skb || !outer || pkt_quote(skb, outer, q) != PKT_OK)
		return TC_ACT_OK;
	f = icmp_flow(q, bpf_ktime_get_ns());
	if (!f)
		return TC_ACT_OK;
	snat = f->flags & FLOW_F_SNAT;
	if (f->dir == FLOW_REPLY) {
		if (!snat)
			return TC_ACT_OK;
		__builtin_memcpy(peer, q->daddr, 16); /* the backend */
		if (pkt_set_addr(skb, q, 0, A16(f->addr), f->port) < 0 || pkt_set_addr(skb, q, 1, A16(f->nat_addr), f->nat_port) < 0)
			return TC_ACT_SHOT;
		if (addr_eq(outer->saddr, peer) && pkt_set_ip(skb, outer, 0, A16(f->nat_addr)) < 0)
			return TC_ACT_SHOT;
		if (pkt_set_ip(skb, outer, 1, A16(f->addr)) < 0)
			return TC_ACT_SHOT;
	} else {
		if (pkt_set_addr(skb, q, 0, A16(f->addr), f->port) < 0)
			return TC_ACT_SHOT;
		if (snat && pkt_set_addr(skb, q, 1, A16(f->nat_addr), f->nat_port) < 0)
			return TC_ACT_SHOT;
		if (snat && pkt_set_ip(skb, outer, 0, A16(f->nat_addr)) < 0)
			return TC_ACT_SHOT;
		if (pkt_set_ip(skb, outer, 1, A16(f->addr)) < 0)
			return TC_ACT_SHOT;
		if (!snat)
			return TC_ACT_OK;
	}
	fwd_lookup(skb, &fw, outer, outer->saddr, outer->daddr, 0, 0, skb->ingress_ifindex);
	return forward(skb, &fw);
}

SEC("tc")
int socklb_from_netdev(struct __sk_buff *skb)
{
	struct flow_value *f;
	struct pkt p;
	__u64 now;

	switch (pkt_parse(skb, &p)) {
	case PKT_OK:
		frag_note(&p);
		break;
	case PKT_FRAG_LATER:
		if (!frag_ports_of(&p))
			return TC_ACT_OK;
		break;
	case PKT_ICMP_ERR:
		return icmp_from_netdev(skb, &p);
	default:
		return TC_ACT_OK;
	}
	now = bpf_ktime_get_ns();
	f = flow_lookup(&p, now);
	if (f && f->dir == FLOW_REPLY)
		return (f->flags & FLOW_F_SNAT) ? send_reply(skb, &p, f) : TC_ACT_OK;
	/* A later fragment follows its first one's flow, never starts or
	 * moves one: the first fragment decided. */
	if (p.frag == PKT_FRAG_REST)
		return f ? send_orig(skb, &p, f) : TC_ACT_OK;
	if (f && p.proto == IPPROTO_UDP && !still_member(f)) {
		end_flow(&p, f);
		f = NULL;
	}
	if (!f) {
		int v = start_flow(skb, &p);

		if (v != FLOW_STARTED)
			return v;
		f = flow_lookup(&p, now);
		if (!f || f->dir != FLOW_ORIG)
			return TC_ACT_SHOT;
	}
	return send_orig(skb, &p, f);
}

/* A local backend's reply leaves through the device it would have left by
 * without socklb; its source goes back to the frontend the client asked. */
/* icmp_to_netdev translates an error a local backend (or its node) sends
 * a client about the client's packet (q was client -> backend): the
 * client sees it about the packet it sent, to the frontend. */
__noinline int icmp_to_netdev(struct __sk_buff *skb, struct pkt *outer)
{
	struct flow_value *r;
	struct pkt qp, *q = &qp;
	__u8 backend[16];

	if (!skb || !outer || pkt_quote(skb, outer, q) != PKT_OK)
		return TC_ACT_OK;
	r = icmp_flow(q, bpf_ktime_get_ns());
	if (!r || r->dir != FLOW_REPLY || (r->flags & FLOW_F_SNAT))
		return TC_ACT_OK;
	__builtin_memcpy(backend, q->daddr, 16);
	if (pkt_set_addr(skb, q, 1, A16(r->nat_addr), r->nat_port) < 0)
		return TC_ACT_SHOT;
	if (addr_eq(outer->saddr, backend) && pkt_set_ip(skb, outer, 0, A16(r->nat_addr)) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc")
int socklb_to_netdev(struct __sk_buff *skb)
{
	struct flow_value *r;
	struct pkt p;

	switch (pkt_parse(skb, &p)) {
	case PKT_OK:
		frag_note(&p);
		break;
	case PKT_FRAG_LATER:
		if (!frag_ports_of(&p))
			return TC_ACT_OK;
		break;
	case PKT_ICMP_ERR:
		return icmp_to_netdev(skb, &p);
	default:
		return TC_ACT_OK;
	}
	r = flow_lookup(&p, bpf_ktime_get_ns());
	if (!r || r->dir != FLOW_REPLY || (r->flags & FLOW_F_SNAT))
		return TC_ACT_OK;
	if (pkt_set_addr(skb, &p, 0, A16(r->nat_addr), r->nat_port) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
