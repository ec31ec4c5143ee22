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

/* The IPv6 fragment header (RFC 8200 4.5), and its offset and M bits. */
#define PKT_IPPROTO_FRAGMENT 44
#define PKT_IP6_OFFSET 0xfff8
#define PKT_IP6_MF 0x0001

struct pkt_frag6 {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off;
	__be32 id;
};

#define PKT_TCP_FIN 0x01
#define PKT_TCP_SYN 0x02
#define PKT_TCP_RST 0x04
#define PKT_TCP_ACK 0x10

enum pkt_parse {
	PKT_OK = 0,
	PKT_OTHER = 1,	   /* not TCP or UDP over IPv4/IPv6: not ours */
	PKT_BAD = 2,	   /* truncated headers */
	PKT_ICMP_ERR = 3,  /* an ICMP error: p is the packet it quotes (icmp.h) */
	PKT_FRAG_LATER = 4, /* a fragment after the first: addresses only, no L4 header (frag.h) */
};

/* pkt.frag: where a packet sits in a fragmented datagram. */
enum pkt_frag {
	PKT_FRAG_NONE = 0,
	PKT_FRAG_FIRST = 1, /* offset 0, more to come: it holds the L4 header */
	PKT_FRAG_REST = 2,  /* offset > 0 */
};

/* How a packet's L4 checksum covers its addresses. */
enum pkt_csum {
	PKT_CSUM_PSEUDO = 0, /* through a pseudo-header: TCP, UDP, ICMPv6 */
	PKT_CSUM_NONE = 1,   /* not at all: ICMPv4, or a quoted IPv4 header (its own checksum absorbs it) */
	PKT_CSUM_DATA = 2,   /* as plain data: a quoted IPv6 header inside ICMPv6 */
};

/* A view of one IP packet in the skb: the packet itself, or the one an
 * ICMP error quotes (then its checksum is the ICMP message's). */
struct pkt {
	__u8 saddr[16]; /* IPv4 v4-mapped, as the maps store it */
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 is6;
	__u8 tcp_flags;
	__u8 addr_csum; /* enum pkt_csum */
	__u8 frag;	/* enum pkt_frag */
	__u8 pad[3];
	__be32 ip_id;	/* the datagram's id, which its fragments share (IPv4's 16 bits) */
	__u32 l3_off;
	__u32 l4_off;
	__u32 csum_off; /* the checksum covering the ports (and maybe addresses) */
	__u32 csum_flags;
};

/* ICMP types that quote the packet they are about. */
#define PKT_ICMP_DEST_UNREACH 3
#define PKT_ICMP_TIME_EXCEEDED 11
#define PKT_ICMP_PARAMETERPROB 12
#define PKT_ICMPV6_DEST_UNREACH 1
#define PKT_ICMPV6_PKT_TOOBIG 2
#define PKT_ICMPV6_TIME_EXCEED 3
#define PKT_ICMPV6_PARAMPROB 4

/* pkt_l3 reads the IP header at off into p. */
static __always_inline enum pkt_parse pkt_l3(struct __sk_buff *skb, struct pkt *p, __u32 off)
{
	p->l3_off = off;
	if (!p->is6) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) < 0)
			return PKT_BAD;
		if (ip.ihl < 5)
			return PKT_BAD;
		p->frag = PKT_FRAG_NONE;
		if (ip.frag_off & bpf_htons(PKT_IP_OFFSET))
			p->frag = PKT_FRAG_REST;
		else if (ip.frag_off & bpf_htons(PKT_IP_MF))
			p->frag = PKT_FRAG_FIRST;
		p->ip_id = ip.id;
		addr_from_v4(p->saddr, ip.saddr);
		addr_from_v4(p->daddr, ip.daddr);
		p->proto = ip.protocol;
		p->l4_off = off + ip.ihl * 4;
	} else {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) < 0)
			return PKT_BAD;
		__builtin_memcpy(p->saddr, &ip6.saddr, 16);
		__builtin_memcpy(p->daddr, &ip6.daddr, 16);
		p->frag = PKT_FRAG_NONE;
		p->proto = ip6.nexthdr;
		p->l4_off = off + sizeof(ip6);
		/* A fragment header right after the fixed one; other
		 * extension headers are not ours. */
		if (p->proto == PKT_IPPROTO_FRAGMENT) {
			struct pkt_frag6 fh;

			if (bpf_skb_load_bytes(skb, p->l4_off, &fh, sizeof(fh)) < 0)
				return PKT_BAD;
			p->proto = fh.nexthdr;
			p->l4_off += sizeof(fh);
			p->ip_id = fh.id;
			if (fh.frag_off & bpf_htons(PKT_IP6_OFFSET))
				p->frag = PKT_FRAG_REST;
			else if (fh.frag_off & bpf_htons(PKT_IP6_MF))
				p->frag = PKT_FRAG_FIRST;
		}
	}
	return PKT_OK;
}

/* pkt_ports reads a TCP or UDP header's ports (and TCP's flags). */
static __always_inline enum pkt_parse pkt_ports(struct __sk_buff *skb, struct pkt *p)
{
	__u16 ports[2];

	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return PKT_OTHER;
	/* A quoted TCP header may stop after 8 bytes, before the flags. */
	if (p->proto != IPPROTO_TCP || bpf_skb_load_bytes(skb, p->l4_off + 13, &p->tcp_flags, 1) < 0)
		p->tcp_flags = 0;
	if (bpf_skb_load_bytes(skb, p->l4_off, ports, sizeof(ports)) < 0)
		return PKT_BAD;
	p->sport = ports[0];
	p->dport = ports[1];
	return PKT_OK;
}

/* pkt_is_icmp_err tells ICMP errors, which quote a packet, from the rest. */
static __always_inline int pkt_is_icmp_err(struct __sk_buff *skb, const struct pkt *p)
{
	__u8 type;

	if (p->proto != (p->is6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return 0;
	if (bpf_skb_load_bytes(skb, p->l4_off, &type, 1) < 0)
		return 0;
	if (p->is6)
		return type >= PKT_ICMPV6_DEST_UNREACH && type <= PKT_ICMPV6_PARAMPROB;
	return type == PKT_ICMP_DEST_UNREACH || type == PKT_ICMP_TIME_EXCEEDED || type == PKT_ICMP_PARAMETERPROB;
}

/* pkt_parse reads the packet's 5-tuple. Of a fragmented datagram only the
 * first fragment holds the ports: a later one is PKT_FRAG_LATER, its
 * addresses read and its ports left to frag.h, which the first one's left
 * behind. IPv6 extension headers other than a fragment header are not ours.
 * An ICMP error is read as its outer packet (addresses only): pkt_quote
 * reads the packet it quotes. */
static __always_inline enum pkt_parse pkt_parse(struct __sk_buff *skb, struct pkt *p)
{
	enum pkt_parse r;

	if (skb->protocol == bpf_htons(ETH_P_IP))
		p->is6 = 0;
	else if (skb->protocol == bpf_htons(ETH_P_IPV6))
		p->is6 = 1;
	else
		return PKT_OTHER;
	r = pkt_l3(skb, p, ETH_HLEN);
	if (r != PKT_OK)
		return r;
	if (p->frag == PKT_FRAG_REST) {
		if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
			return PKT_OTHER;
		/* No L4 header here: only the addresses change, and the
		 * first fragment's L4 checksum covers them. */
		p->tcp_flags = 0;
		p->addr_csum = PKT_CSUM_NONE;
		return PKT_FRAG_LATER;
	}
	if (pkt_is_icmp_err(skb, p)) {
		p->csum_off = p->l4_off + 2;
		p->csum_flags = 0;
		p->addr_csum = p->is6 ? PKT_CSUM_PSEUDO : PKT_CSUM_NONE;
		return PKT_ICMP_ERR;
	}
	r = pkt_ports(skb, p);
	if (r != PKT_OK)
		return r;
	p->csum_off = p->l4_off + (p->proto == IPPROTO_TCP ? offsetof(struct tcphdr, check) : offsetof(struct udphdr, check));
	/* An IPv4 UDP checksum of 0 means "none": it stays 0, and a computed
	 * 0 is sent as 0xffff. TCP and IPv6 UDP always have one. */
	p->csum_flags = p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	p->addr_csum = PKT_CSUM_PSEUDO;
	return PKT_OK;
}

/* pkt_quote reads the TCP or UDP packet the ICMP error outer quotes into q,
 * whose checksum is then the ICMP message's. */
static __always_inline enum pkt_parse pkt_quote(struct __sk_buff *skb, const struct pkt *outer, struct pkt *q)
{
	enum pkt_parse r;

	q->is6 = outer->is6;
	/* The quoted packet follows the 8-byte ICMP header. */
	r = pkt_l3(skb, q, outer->l4_off + 8);
	if (r == PKT_OK && q->frag == PKT_FRAG_REST)
		r = PKT_OTHER;
	if (r == PKT_OK)
		r = pkt_ports(skb, q);
	if (r != PKT_OK)
		return r;
	q->csum_off = outer->csum_off;
	q->csum_flags = 0;
	q->addr_csum = q->is6 ? PKT_CSUM_DATA : PKT_CSUM_NONE;
	return PKT_OK;
}

/* pkt_set_ip sets p's source (dst 0) or destination (dst 1) address,
 * updating the IPv4 header's checksum and the checksum that covers the
 * address (p->addr_csum), and p itself. */
__noinline int pkt_set_ip(struct __sk_buff *skb, struct pkt *p, int dst, const struct addr16 *a)
{
	const __u8 *addr;
	__u8 *cur;
	__u64 pseudo;

	/* A global function: the verifier checks it once, not at every call,
	 * and cannot assume its pointers are set. */
	if (!skb || !p || !a)
		return -1;
	addr = a->b;
	cur = dst ? p->daddr : p->saddr;
	pseudo = p->addr_csum == PKT_CSUM_PSEUDO ? BPF_F_PSEUDO_HDR : 0;

	if (addr_eq(cur, addr))
		return 0;
	if (!p->is6) {
		__be32 from = addr_to_v4(cur), to = addr_to_v4(addr);
		__u32 off = p->l3_off + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));

		if (p->addr_csum != PKT_CSUM_NONE &&
		    bpf_l4_csum_replace(skb, p->csum_off, from, to, p->csum_flags | pseudo | 4) < 0)
			return -1;
		if (bpf_l3_csum_replace(skb, p->l3_off + offsetof(struct iphdr, check), from, to, 4) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, off, &to, 4, 0) < 0)
			return -1;
	} else {
		__u32 off = p->l3_off + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
		__u8 from[16];
		__s64 diff;

		__builtin_memcpy(from, cur, 16);
		diff = bpf_csum_diff((__be32 *)from, 16, (__be32 *)addr, 16, 0);
		if (diff < 0)
			return -1;
		if (p->addr_csum != PKT_CSUM_NONE &&
		    bpf_l4_csum_replace(skb, p->csum_off, 0, diff, p->csum_flags | pseudo) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, off, addr, 16, 0) < 0)
			return -1;
	}
	__builtin_memcpy(cur, addr, 16);
	return 0;
}

/* pkt_set_addr sets p's source (dst 0) or destination (dst 1) address
 * and port to addr:port, with their checksums. */
__noinline int pkt_set_addr(struct __sk_buff *skb, struct pkt *p, int dst, const struct addr16 *addr, __be16 port)
{
	__be16 *cur_port;

	if (!skb || !p || !addr)
		return -1;
	cur_port = dst ? &p->dport : &p->sport;

	if (pkt_set_ip(skb, p, dst, addr) < 0)
		return -1;
	if (p->frag == PKT_FRAG_REST) {
		/* The ports are in the first fragment, rewritten there. */
		*cur_port = port;
		return 0;
	}
	if (*cur_port != port) {
		__u32 off = p->l4_off + (dst ? 2 : 0);

		if (bpf_l4_csum_replace(skb, p->csum_off, *cur_port, port, p->csum_flags | 2) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, off, &port, 2, 0) < 0)
			return -1;
		*cur_port = port;
	}
	return 0;
}

#endif
