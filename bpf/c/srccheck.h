/* loadBalancerSourceRanges for sockets on the node. kube-proxy drops a
 * locally made packet to an LB IP whose source no range holds
 * (KUBE-PROXY-FIREWALL in OUTPUT). The connect and sendmsg hooks run before
 * the kernel picks the source address, so the check waits for the packet:
 * lb_sock_record flags a socket sent through a frontend with ranges, and the
 * egress hook checks that socket's packets to the backend it was given.
 */
#ifndef SOCKLB_SRCCHECK_H
#define SOCKLB_SRCCHECK_H

#include <linux/if_ether.h>

#include "lb.h"
#include "pkt.h"

/* srccheck_frontend finds the entry of st that sent p's socket to p's
 * destination, and its frontend as the Services map holds it now: ranges
 * removed since the connect stop applying, as kube-proxy's rules would. */
static __always_inline int srccheck_frontend(const struct sock_state *st, const struct pkt *p, struct svc_value *sv)
{
	struct svc_key key = {};
	struct sock_entry e;

#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++) {
		e = st->e[i];
		if (!e.affinity_id || e.backend_port != p->dport || !addr_eq(e.backend, p->daddr))
			continue;
		__builtin_memcpy(key.addr, e.frontend, sizeof(key.addr));
		key.port = e.frontend_port;
		key.proto = p->proto;
		if (lb_service(&key, sv))
			return 1;
	}
	return 0;
}

/* srccheck_pass returns 0 when skb must be dropped: its socket was sent
 * through a frontend with loadBalancerSourceRanges and the source the
 * kernel picked is in none of them. Every packet is checked, not only the
 * first: a dropped SYN is retransmitted, and an unconnected UDP socket may
 * send from another address next time. */
static __always_inline int srccheck_pass(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct sock_state *st;
	struct svc_value sv;
	struct pkt p = {};

	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	st = bpf_sk_storage_get(&sk_state, sk, 0, 0);
	if (!st || !st->src_check)
		return 1;
	p.is6 = skb->protocol == bpf_htons(ETH_P_IPV6);
	/* A socket's packets are checked before IP fragments them; a later
	 * fragment (an IP_HDRINCL socket's) has no ports to check by. */
	if (pkt_l3(skb, &p, 0) != PKT_OK || p.frag == PKT_FRAG_REST || pkt_ports(skb, &p) != PKT_OK)
		return 1;
	if (!srccheck_frontend(st, &p, &sv) || lb_src_allowed(&sv, p.saddr))
		return 1;
	/* Counted with the per-packet path's drops of the same cause. */
	{
		__u32 k = FLOW_EV_SRC_RANGE;
		__u64 *n = bpf_map_lookup_elem(&flow_events, &k);

		if (n)
			(*n)++;
	}
	return 0;
}

#endif
