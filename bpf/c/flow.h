/* Flows of the per-packet path: conntrack's job for packets from other
 * machines. A flow is two entries of the flows map, ORIG (the client's
 * packets) and REPLY (the backend's), each keyed by the tuple its packets
 * carry; the ORIG entry holds the flow's age and state.
 */
#ifndef SOCKLB_FLOW_H
#define SOCKLB_FLOW_H

#include "lb.h"
#include "maps.h"
#include "pkt.h"
#include "scratch.h"

#define FLOW_SEC 1000000000ULL

/* Lifetimes, as nf_conntrack's defaults under kube-proxy (which sets the
 * established one to 24 h): set at load time by the agent. */
volatile const __u64 flow_tcp_syn_ns = 120 * FLOW_SEC;
volatile const __u64 flow_tcp_established_ns = 86400 * FLOW_SEC;
volatile const __u64 flow_tcp_closing_ns = 10 * FLOW_SEC;
volatile const __u64 flow_udp_ns = 30 * FLOW_SEC;
volatile const __u64 flow_udp_stream_ns = 120 * FLOW_SEC;

/* SNAT source ports when the client's own is taken: above the kernel's
 * default ephemeral range (32768-60999), so the node's own connections
 * rarely want one a flow holds (and a port a socket of the node holds is
 * never taken: flow_port_taken). The agent sets them from --nat-port-range. */
volatile const __u16 nat_port_min = 61000;
volatile const __u16 nat_port_max = 65535;

/* Tries to find a free SNAT port toward one backend, as Cilium's
 * SNAT_COLLISION_RETRIES: one random port, then the next ones. */
#define FLOW_NAT_TRIES 32

static __always_inline void flow_event(enum flow_event ev)
{
	__u32 k = ev;
	__u64 *n = bpf_map_lookup_elem(&flow_events, &k);

	if (n)
		(*n)++;
}

static __always_inline void flow_key_of(struct flow_key *k, const struct pkt *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->saddr, p->saddr, 16);
	__builtin_memcpy(k->daddr, p->daddr, 16);
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
}

/* flow_timeout is how long an ORIG entry lives without a packet. */
static __always_inline __u64 flow_timeout(const struct flow_value *v, __u8 proto)
{
	if (proto == IPPROTO_TCP) {
		if (v->flags & FLOW_F_CLOSING)
			return flow_tcp_closing_ns;
		return (v->flags & FLOW_F_REPLIED) ? flow_tcp_established_ns : flow_tcp_syn_ns;
	}
	return (v->flags & FLOW_F_REPLIED) ? flow_udp_stream_ns : flow_udp_ns;
}

static __always_inline int flow_expired(const struct flow_value *v, __u8 proto, __u64 now)
{
	/* Another CPU may have stamped it after this packet read the clock. */
	return now > v->last_seen && now - v->last_seen > flow_timeout(v, proto);
}

/* flow_reply_key is the key of the REPLY entry of the ORIG entry k -> v. */
static __always_inline void flow_reply_key(struct flow_key *r, const struct flow_key *k, const struct flow_value *v)
{
	__builtin_memset(r, 0, sizeof(*r));
	__builtin_memcpy(r->saddr, v->addr, 16);
	__builtin_memcpy(r->daddr, v->nat_addr, 16);
	r->sport = v->port;
	r->dport = v->nat_port;
	r->proto = k->proto;
}

/* flow_orig_key is the key of the ORIG entry of the REPLY entry k -> v. */
static __always_inline void flow_orig_key(struct flow_key *o, const struct flow_key *k, const struct flow_value *v)
{
	__builtin_memset(o, 0, sizeof(*o));
	__builtin_memcpy(o->saddr, v->addr, 16);
	__builtin_memcpy(o->daddr, v->nat_addr, 16);
	o->sport = v->port;
	o->dport = v->nat_port;
	o->proto = k->proto;
}

/* flow_forget removes the flow whose ORIG entry is k -> v. */
static __always_inline void flow_forget(const struct flow_key *k, const struct flow_value *v)
{
	struct flow_key r;

	flow_reply_key(&r, k, v);
	bpf_map_delete_elem(&flows, &r);
	bpf_map_delete_elem(&flows, k);
}

/* flow_seen notes a packet of the flow whose ORIG entry is o: its age, a
 * reply, a TCP FIN or RST. Plain stores: two CPUs racing write the same
 * kind of value, and a lost flag is set again by the next packet. */
static __always_inline void flow_seen(struct flow_value *o, const struct pkt *p, int reply, __u64 now)
{
	__u8 fl = o->flags;

	/* A client's new SYN on a flow it closed reuses the flow, as
	 * conntrack reopens a closed connection: its timers start over. */
	if (!reply && (p->tcp_flags & (PKT_TCP_SYN | PKT_TCP_ACK)) == PKT_TCP_SYN)
		fl &= ~(FLOW_F_CLOSING | FLOW_F_REPLIED);
	if (reply)
		fl |= FLOW_F_REPLIED;
	if (p->tcp_flags & (PKT_TCP_FIN | PKT_TCP_RST))
		fl |= FLOW_F_CLOSING;
	if (fl != o->flags)
		o->flags = fl;
	o->last_seen = now;
}

/* flow_lookup returns the live entry p belongs to, or NULL. A REPLY entry
 * is live while its ORIG entry is; either is refreshed here. An expired
 * flow is removed, so the caller starts a new one. */
static __noinline struct flow_value *flow_lookup(const struct pkt *p, __u64 now)
{
	struct flow_key k, o;
	struct flow_value *v, *orig;

	flow_key_of(&k, p);
	v = bpf_map_lookup_elem(&flows, &k);
	if (!v)
		return NULL;
	if (v->dir == FLOW_ORIG) {
		if (flow_expired(v, p->proto, now)) {
			flow_forget(&k, v);
			return NULL;
		}
		flow_seen(v, p, 0, now);
		return v;
	}
	flow_orig_key(&o, &k, v);
	orig = bpf_map_lookup_elem(&flows, &o);
	if (!orig || orig->dir != FLOW_ORIG || flow_expired(orig, p->proto, now)) {
		if (orig && orig->dir == FLOW_ORIG)
			flow_forget(&o, orig);
		else
			bpf_map_delete_elem(&flows, &k);
		return NULL;
	}
	flow_seen(orig, p, 1, now);
	return v;
}

/* flow_nat_port picks the SNAT port of a flow's try-th attempt: the
 * client's own first, as netfilter's NAT keeps it when it is free (a
 * client reusing a port then reuses the backend's view of the connection,
 * whose TIME_WAIT accepts the new SYN), then a random one of the range,
 * then the ones after it. */
static __always_inline __be16 flow_nat_port(__be16 client, int try, __u16 *last)
{
	__u16 span = nat_port_max - nat_port_min + 1, port;

	if (try == 0)
		return client;
	if (try == 1)
		port = nat_port_min + bpf_get_prandom_u32() % span;
	else
		port = *last == nat_port_max ? nat_port_min : *last + 1;
	*last = port;
	return bpf_htons(port);
}

/* flow_port_taken reports whether a socket of this node already owns the
 * tuple a reply on rk would carry: a connection of the node's own, or a
 * listener on that port. Such a port is never a flow's. */
static __always_inline int flow_port_taken(struct __sk_buff *skb, const struct flow_key *rk)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	__u32 size;

	if (addr_is_v4(rk->saddr)) {
		t.ipv4.saddr = addr_to_v4(rk->saddr);
		t.ipv4.daddr = addr_to_v4(rk->daddr);
		t.ipv4.sport = rk->sport;
		t.ipv4.dport = rk->dport;
		size = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, rk->saddr, 16);
		__builtin_memcpy(t.ipv6.daddr, rk->daddr, 16);
		t.ipv6.sport = rk->sport;
		t.ipv6.dport = rk->dport;
		size = sizeof(t.ipv6);
	}
	if (rk->proto == IPPROTO_TCP)
		sk = bpf_skc_lookup_tcp(skb, &t, size, BPF_F_CURRENT_NETNS, 0);
	else
		sk = bpf_sk_lookup_udp(skb, &t, size, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	bpf_sk_release(sk);
	return 1;
}

/* flow_reclaim frees the reply tuple rk when the flow holding it is over
 * (expired, or its ORIG entry gone), so a new flow can take it at once
 * instead of after the sweep: a busy client would otherwise run a SNAT
 * range dry with flows that only wait for their timeout. */
static __always_inline int flow_reclaim(const struct flow_key *rk, __u64 now)
{
	struct flow_value *r = bpf_map_lookup_elem(&flows, rk), *o;
	struct flow_key ok;

	if (!r || r->dir != FLOW_REPLY)
		return 0;
	flow_orig_key(&ok, rk, r);
	o = bpf_map_lookup_elem(&flows, &ok);
	if (o && o->dir == FLOW_ORIG && !flow_expired(o, rk->proto, now))
		return 0;
	if (o && o->dir == FLOW_ORIG)
		bpf_map_delete_elem(&flows, &ok);
	bpf_map_delete_elem(&flows, rk);
	return 1;
}

/* flow_claim takes the reply tuple rk for the flow's REPLY entry r: 0
 * when it did, -EEXIST (-17) when another live flow or a socket of the
 * node (with snat: the tuple is the node's own) holds it, another error
 * (the map is full) as the kernel gives it. A global function: the
 * verifier checks it once, not for every try of the caller's loop. */
__noinline int flow_claim(struct __sk_buff *skb, const struct flow_key *rk, const struct flow_value *r, int snat)
{
	__u64 now = bpf_ktime_get_ns();
	int err;

	if (!skb || !rk || !r)
		return -22;
	if (snat && flow_port_taken(skb, rk))
		return -17;
	err = bpf_map_update_elem(&flows, rk, r, BPF_NOEXIST);
	if (err == -17 && flow_reclaim(rk, now))
		err = bpf_map_update_elem(&flows, rk, r, BPF_NOEXIST);
	return err;
}

/* flow_create starts the flow of p toward c's backend, SNATed to snat
 * when it is not NULL (a remote backend), and returns its ORIG entry. NULL
 * when the map is full or no SNAT port is free; the event says which.
 * When another CPU created the same flow first, its entry is returned. */
static __noinline struct flow_value *flow_create(struct __sk_buff *skb, const struct pkt *p, const struct lb_choice *c,
						 __u32 svc_id, const __u8 *snat)
{
	__u32 ifindex = skb->ingress_ifindex;
	struct scratch_space *sc;
	struct flow_value *o, *r;
	struct flow_key ok, rk;
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	__u16 last = 0;
	int err = -1, i;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return NULL;
	o = &sc->orig;
	r = &sc->reply;
	__builtin_memset(o, 0, sizeof(*o));
	flow_key_of(&ok, p);
	__builtin_memcpy(o->addr, c->be.addr, 16);
	o->port = c->be.port;
	o->backend_id = c->id;
	o->svc_id = svc_id;
	o->ifindex = ifindex;
	o->created = now;
	o->last_seen = now;
	o->dir = FLOW_ORIG;
	if (snat) {
		__builtin_memcpy(o->nat_addr, snat, 16);
		o->flags = FLOW_F_SNAT;
	} else {
		__builtin_memcpy(o->nat_addr, p->saddr, 16);
		o->nat_port = p->sport;
	}
	*r = *o;
	r->dir = FLOW_REPLY;
	__builtin_memcpy(r->addr, p->saddr, 16);
	r->port = p->sport;
	__builtin_memcpy(r->nat_addr, p->daddr, 16);
	r->nat_port = p->dport;

	for (i = 0; i < FLOW_NAT_TRIES; i++) {
		if (snat)
			o->nat_port = flow_nat_port(p->sport, i, &last);
		flow_reply_key(&rk, &ok, o);
		err = flow_claim(skb, &rk, r, snat != NULL);
		if (err != -17 /* EEXIST */ || !snat)
			break;
	}
	if (err) {
		flow_event(err == -17 ? FLOW_EV_NO_PORT : FLOW_EV_FULL);
		return NULL;
	}
	err = bpf_map_update_elem(&flows, &ok, o, BPF_NOEXIST);
	if (err) {
		bpf_map_delete_elem(&flows, &rk);
		if (err != -17) {
			flow_event(FLOW_EV_FULL);
			return NULL;
		}
	} else {
		flow_event(FLOW_EV_NEW);
	}
	return bpf_map_lookup_elem(&flows, &ok);
}

#endif
