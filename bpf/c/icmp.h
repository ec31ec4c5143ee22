/* ICMP on the per-packet path: the error kube-proxy's REJECT sends for a
 * Service without endpoints, and the errors other hosts send about a
 * translated flow's packets, which must be translated like the flow
 * (conntrack's RELATED NAT): a client's connected UDP socket learns of a
 * closed port, and path MTU discovery works, only when the quoted packet
 * is the one the client sent or got.
 */
#ifndef SOCKLB_ICMP_H
#define SOCKLB_ICMP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include <linux/pkt_cls.h>

#include "flow.h"
#include "pkt.h"
#include "scratch.h"

/* What an error quotes of the packet it is about: its IP header (without
 * options) and the first 8 bytes after it, the minimum RFC 792 asks. */
#define ICMP_QUOTE4 (20 + 8)
#define ICMP_QUOTE6 (40 + 8)
#define ICMP_FRAME4 (ETH_HLEN + 20 + 8 + ICMP_QUOTE4)
#define ICMP_FRAME6 (ETH_HLEN + 40 + 8 + ICMP_QUOTE6)

static __always_inline __u16 icmp_fold(__s64 sum)
{
	__u32 s = (__u32)sum;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

/* icmp_reject turns p, the first packet of a flow to a Service without
 * endpoints, into the ICMP "port unreachable" iptables' REJECT answers
 * with, and sends it back out the device p came in on: a TCP client's
 * connect() fails with ECONNREFUSED at once, as under kube-proxy. A
 * packet with IPv4 options is dropped instead. */
__noinline int icmp_reject(struct __sk_buff *skb, const struct pkt *p)
{
	struct scratch_space *sc;
	__u32 zero = 0;
	__u8 *f;

	if (!skb || !p)
		return TC_ACT_SHOT;
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return TC_ACT_SHOT;
	f = sc->frame;
	/* Ethernet: back where it came from. */
	if (bpf_skb_load_bytes(skb, 0, f + ETH_ALEN, ETH_ALEN) < 0 || bpf_skb_load_bytes(skb, ETH_ALEN, f, ETH_ALEN) < 0)
		return TC_ACT_SHOT;
	if (!p->is6) {
		struct iphdr *ip = (void *)(f + ETH_HLEN);
		__u8 *icmp = f + ETH_HLEN + 20;

		if (p->l4_off != ETH_HLEN + 20)
			return TC_ACT_SHOT;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, icmp + 8, ICMP_QUOTE4) < 0)
			return TC_ACT_SHOT;
		f[12] = 0x08;
		f[13] = 0x00;
		__builtin_memset(ip, 0, 20);
		ip->version = 4;
		ip->ihl = 5;
		ip->tot_len = bpf_htons(20 + 8 + ICMP_QUOTE4);
		ip->ttl = 64;
		ip->protocol = IPPROTO_ICMP;
		ip->saddr = addr_to_v4(p->daddr);
		ip->daddr = addr_to_v4(p->saddr);
		ip->check = icmp_fold(bpf_csum_diff(NULL, 0, (__be32 *)ip, 20, 0));
		__builtin_memset(icmp, 0, 8);
		icmp[0] = PKT_ICMP_DEST_UNREACH;
		icmp[1] = 3; /* port unreachable */
		*(__u16 *)(icmp + 2) = icmp_fold(bpf_csum_diff(NULL, 0, (__be32 *)icmp, 8 + ICMP_QUOTE4, 0));
		if (bpf_skb_change_tail(skb, ICMP_FRAME4, 0) < 0 || bpf_skb_store_bytes(skb, 0, f, ICMP_FRAME4, 0) < 0)
			return TC_ACT_SHOT;
	} else {
		struct ipv6hdr *ip6 = (void *)(f + ETH_HLEN);
		__u8 *icmp = f + ETH_HLEN + 40;
		__u8 *ph = sc->pseudo;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, icmp + 8, ICMP_QUOTE6) < 0)
			return TC_ACT_SHOT;
		f[12] = 0x86;
		f[13] = 0xdd;
		__builtin_memset(ip6, 0, 40);
		ip6->version = 6;
		ip6->payload_len = bpf_htons(8 + ICMP_QUOTE6);
		ip6->nexthdr = IPPROTO_ICMPV6;
		ip6->hop_limit = 64;
		__builtin_memcpy(&ip6->saddr, p->daddr, 16);
		__builtin_memcpy(&ip6->daddr, p->saddr, 16);
		__builtin_memset(icmp, 0, 8);
		icmp[0] = PKT_ICMPV6_DEST_UNREACH;
		icmp[1] = 4; /* port unreachable */
		/* The pseudo-header: addresses, length, next header. */
		__builtin_memcpy(ph, p->daddr, 16);
		__builtin_memcpy(ph + 16, p->saddr, 16);
		*(__be32 *)(ph + 32) = bpf_htonl(8 + ICMP_QUOTE6);
		*(__be32 *)(ph + 36) = bpf_htonl(IPPROTO_ICMPV6);
		*(__u16 *)(icmp + 2) = icmp_fold(bpf_csum_diff(NULL, 0, (__be32 *)icmp, 8 + ICMP_QUOTE6,
							       bpf_csum_diff(NULL, 0, (__be32 *)ph, 40, 0)));
		if (bpf_skb_change_tail(skb, ICMP_FRAME6, 0) < 0 || bpf_skb_store_bytes(skb, 0, f, ICMP_FRAME6, 0) < 0)
			return TC_ACT_SHOT;
	}
	return bpf_redirect(skb->ifindex, 0);
}

/* icmp_flow finds the flow an error's quoted packet q belongs to. q went
 * out in one direction of the flow; the map holds the tuple of the other,
 * so the lookup is q reversed. */
static __always_inline struct flow_value *icmp_flow(const struct pkt *q, __u64 now)
{
	struct pkt rev = *q;

	__builtin_memcpy(rev.saddr, q->daddr, 16);
	__builtin_memcpy(rev.daddr, q->saddr, 16);
	rev.sport = q->dport;
	rev.dport = q->sport;
	rev.tcp_flags = 0;
	return flow_lookup(&rev, now);
}

#endif
