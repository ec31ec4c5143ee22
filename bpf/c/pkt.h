/* A TCP or UDP packet on an Ethernet device: where its addresses and ports
 * are, read once, and rewritten in place with their checksums. The
 * per-packet path's only contact with packet bytes.
 */
#ifndef SOCKLB_PKT_H
#define SOCKLB_PKT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "addr.h"

/* IPv4 fragment bits (include/net/ip.h), not in the UAPI headers. */
#define PKT_IP_MF 0x2000
#define PKT_IP_OFFSET 0x1fff

#define PKT_TCP_FIN 0x01
#define PKT_TCP_SYN 0x02
#define PKT_TCP_RST 0x04

enum pkt_parse {
	PKT_OK = 0,
	PKT_OTHER = 1, /* not TCP or UDP over IPv4/IPv6 (or a fragment): not ours */
	PKT_BAD = 2,   /* truncated headers */
};

struct pkt {
	__u8 saddr[16]; /* IPv4 v4-mapped, as the maps store it */
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 is6;
	__u8 tcp_flags;
	__u8 pad;
	__u32 l4_off;
	__u32 csum_off; /* the L4 checksum's offset */
};

/* pkt_parse reads the packet's 5-tuple. IPv4 fragments are left alone:
 * only the first holds the ports, and translating it alone would split the
 * datagram between two destinations. IPv6 extension headers likewise. */
static __always_inline enum pkt_parse pkt_parse(struct __sk_buff *skb, struct pkt *p)
{
	__u16 ports[2];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
			return PKT_BAD;
		if (ip.ihl < 5)
			return PKT_BAD;
		if (ip.frag_off & bpf_htons(PKT_IP_MF | PKT_IP_OFFSET))
			return PKT_OTHER;
		addr_from_v4(p->saddr, ip.saddr);
		addr_from_v4(p->daddr, ip.daddr);
		p->proto = ip.protocol;
		p->is6 = 0;
		p->l4_off = ETH_HLEN + ip.ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) < 0)
			return PKT_BAD;
		__builtin_memcpy(p->saddr, &ip6.saddr, 16);
		__builtin_memcpy(p->daddr, &ip6.daddr, 16);
		p->proto = ip6.nexthdr;
		p->is6 = 1;
		p->l4_off = ETH_HLEN + sizeof(ip6);
	} else {
		return PKT_OTHER;
	}
	switch (p->proto) {
	case IPPROTO_TCP:
		p->csum_off = p->l4_off + offsetof(struct tcphdr, check);
		if (bpf_skb_load_bytes(skb, p->l4_off + 13, &p->tcp_flags, 1) < 0)
			return PKT_BAD;
		break;
	case IPPROTO_UDP:
		p->csum_off = p->l4_off + offsetof(struct udphdr, check);
		p->tcp_flags = 0;
		break;
	default:
		return PKT_OTHER;
	}
	if (bpf_skb_load_bytes(skb, p->l4_off, ports, sizeof(ports)) < 0)
		return PKT_BAD;
	p->sport = ports[0];
	p->dport = ports[1];
	return PKT_OK;
}

/* An IPv4 UDP checksum of 0 means "none": it stays 0, and a computed 0 is
 * sent as 0xffff. TCP and IPv6 UDP always have one. */
static __always_inline __u64 pkt_csum_flags(const struct pkt *p)
{
	return p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
}

/* pkt_set_addr sets the source (dst 0) or destination (dst 1) address
 * and port of p to addr:port, updating the IPv4 header checksum and the
 * L4 checksum (whose pseudo-header holds the addresses), and p itself. */
static __noinline int pkt_set_addr(struct __sk_buff *skb, struct pkt *p, int dst, const __u8 addr[16], __be16 port)
{
	__u8 *cur = dst ? p->daddr : p->saddr;
	__be16 *cur_port = dst ? &p->dport : &p->sport;
	__u64 fl = pkt_csum_flags(p);

	if (!addr_eq(cur, addr)) {
		if (!p->is6) {
			__be32 from = addr_to_v4(cur), to = addr_to_v4(addr);
			__u32 off = ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));

			if (bpf_l4_csum_replace(skb, p->csum_off, from, to, fl | BPF_F_PSEUDO_HDR | 4) < 0)
				return -1;
			if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), from, to, 4) < 0)
				return -1;
			if (bpf_skb_store_bytes(skb, off, &to, 4, 0) < 0)
				return -1;
		} else {
			__u32 off = ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
			__u8 from[16];
			__s64 diff;

			__builtin_memcpy(from, cur, 16);
			diff = bpf_csum_diff((__be32 *)from, 16, (__be32 *)addr, 16, 0);
			if (diff < 0)
				return -1;
			if (bpf_l4_csum_replace(skb, p->csum_off, 0, diff, fl | BPF_F_PSEUDO_HDR) < 0)
				return -1;
			if (bpf_skb_store_bytes(skb, off, addr, 16, 0) < 0)
				return -1;
		}
		__builtin_memcpy(cur, addr, 16);
	}
	if (*cur_port != port) {
		__u32 off = p->l4_off + (dst ? 2 : 0);

		if (bpf_l4_csum_replace(skb, p->csum_off, *cur_port, port, fl | 2) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, off, &port, 2, 0) < 0)
			return -1;
		*cur_port = port;
	}
	return 0;
}

#endif
