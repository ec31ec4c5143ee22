/* Forwarding a translated packet: where the FIB sends it, and sending it
 * there. A SNATed packet carries one of the node's own addresses as its
 * source (or, as a reply, a frontend's), which the stack's input path drops
 * as a martian, so such packets leave through bpf_redirect with the FIB's
 * answer, as Cilium's fib_redirect does.
 */
#ifndef SOCKLB_FWD_H
#define SOCKLB_FWD_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "addr.h"
#include "maps.h"
#include "pkt.h"

#define FWD_AF_INET 2
#define FWD_AF_INET6 10

enum fwd_where {
	FWD_LOCAL = 0,	/* this node delivers it: its own address, or a local pod */
	FWD_DEVICE = 1, /* out through one of the devices socklb serves: another node */
	FWD_NONE = 2,	/* no route */
};

struct fwd {
	struct bpf_fib_lookup fib;
	int ret;
};

/* fwd_lookup asks the FIB where a packet from src to dst, arriving on
 * ifindex, goes. */
static __always_inline void fwd_lookup(struct __sk_buff *skb, struct fwd *f, const struct pkt *p, const __u8 src[16],
				       const __u8 dst[16], __be16 sport, __be16 dport, __u32 ifindex)
{
	struct bpf_fib_lookup *fib = &f->fib;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->l4_protocol = p->proto;
	fib->sport = sport;
	fib->dport = dport;
	fib->ifindex = ifindex;
	if (!p->is6) {
		fib->family = FWD_AF_INET;
		fib->ipv4_src = addr_to_v4(src);
		fib->ipv4_dst = addr_to_v4(dst);
	} else {
		fib->family = FWD_AF_INET6;
		__builtin_memcpy(fib->ipv6_src, src, 16);
		__builtin_memcpy(fib->ipv6_dst, dst, 16);
	}
	f->ret = bpf_fib_lookup(skb, fib, sizeof(*fib), 0);
}

/* fwd_where sorts a lookup's answer. devices holds the ifindexes socklb
 * serves (nat_devs): leaving through one means another node. */
static __always_inline enum fwd_where fwd_where(const struct fwd *f)
{
	__u32 oif = f->fib.ifindex;

	switch (f->ret) {
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return FWD_LOCAL;
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return bpf_map_lookup_elem(&nat_devs, &oif) ? FWD_DEVICE : FWD_LOCAL;
	}
	return FWD_NONE;
}

/* fwd_redirect sends the packet out the lookup's device, its Ethernet
 * header from the lookup, or from the neighbour table when the lookup had
 * no neighbour yet. */
static __always_inline int fwd_redirect(struct __sk_buff *skb, const struct fwd *f)
{
	struct bpf_redir_neigh nh = {};

	if (f->ret == BPF_FIB_LKUP_RET_SUCCESS) {
		if (bpf_skb_store_bytes(skb, 0, f->fib.dmac, ETH_ALEN, 0) < 0 ||
		    bpf_skb_store_bytes(skb, ETH_ALEN, f->fib.smac, ETH_ALEN, 0) < 0)
			return TC_ACT_SHOT;
		return bpf_redirect(f->fib.ifindex, 0);
	}
	nh.nh_family = f->fib.family;
	if (f->fib.family == FWD_AF_INET)
		nh.ipv4_nh = f->fib.ipv4_dst;
	else
		__builtin_memcpy(nh.ipv6_nh, f->fib.ipv6_dst, 16);
	return bpf_redirect_neigh(f->fib.ifindex, &nh, sizeof(nh), 0);
}

#endif
