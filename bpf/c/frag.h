/* Fragments of datagrams from other machines (IPv4, and IPv6 with the
 * fragment header first). kube-proxy's conntrack
 * reassembles them; the per-packet path sees them one by one, and only the
 * first holds the ports. So the first fragment leaves its ports under the
 * datagram's (addresses, protocol, id), and each later one takes them from
 * there and follows the same flow, its addresses rewritten as the first
 * one's were (Cilium's fragment tracking does the same). A later fragment
 * that arrives before its first, or whose first never came, is left to
 * the stack untouched, as before.
 */
#ifndef SOCKLB_FRAG_H
#define SOCKLB_FRAG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "pkt.h"

struct frag_key {
	__u8 saddr[16]; /* IPv4 v4-mapped */
	__u8 daddr[16];
	__be32 id;
	__u8 proto;
	__u8 pad[3];
};

struct frag_value {
	__be16 sport;
	__be16 dport;
};

/* Datagrams being fragmented right now, through this node: an LRU, so a
 * datagram whose last fragment was lost ages out under new ones. Not
 * pinned: an agent restart loses at most the fragments in flight. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct frag_key);
	__type(value, struct frag_value);
} frag_ports SEC(".maps");

static __always_inline void frag_key_of(struct frag_key *k, const struct pkt *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->saddr, p->saddr, 16);
	__builtin_memcpy(k->daddr, p->daddr, 16);
	k->id = p->ip_id;
	k->proto = p->proto;
}

/* frag_note leaves a first fragment's ports for the rest of its datagram;
 * call it before any rewrite, the later fragments carrying the addresses
 * it arrived with. */
static __always_inline void frag_note(const struct pkt *p)
{
	struct frag_key k;
	struct frag_value v;

	if (p->frag != PKT_FRAG_FIRST)
		return;
	frag_key_of(&k, p);
	v.sport = p->sport;
	v.dport = p->dport;
	bpf_map_update_elem(&frag_ports, &k, &v, BPF_ANY);
}

/* frag_ports_of fills a later fragment's ports from its first fragment's;
 * 0 when that one was never seen. */
static __always_inline int frag_ports_of(struct pkt *p)
{
	struct frag_key k;
	struct frag_value *v;

	frag_key_of(&k, p);
	v = bpf_map_lookup_elem(&frag_ports, &k);
	if (!v)
		return 0;
	p->sport = v->sport;
	p->dport = v->dport;
	return 1;
}

#endif
