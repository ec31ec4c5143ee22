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

#define FLOW_SEC 1000000000ULL

/* Lifetimes, as nf_conntrack's defaults under kube-proxy (which sets the
 * established one to 24 h): set at load time by the agent. */
volatile const __u64 flow_tcp_syn_ns = 120 * FLOW_SEC;
volatile const __u64 flow_tcp_established_ns = 86400 * FLOW_SEC;
volatile const __u64 flow_tcp_closing_ns = 10 * FLOW_SEC;
volatile const __u64 flow_udp_ns = 30 * FLOW_SEC;
volatile const __u64 flow_udp_stream_ns = 120 * FLOW_SEC;

/* SNAT source ports: above the kernel's default ephemeral range
 * (32768-60999), so the node's own connections never take a port a flow
 * holds. The agent sets them from --nat-port-range. */
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
	return now - v->last_seen > flow_timeout(v, proto);
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

/* flow_nat_port picks the next SNAT port to try: the client's own when it
 * is in range (as netfilter keeps it when it can), then a random one, then
 * the ones after it. */
static __always_inline __be16 flow_nat_port(__be16 client, int try, __u16 *last)
{
	__u16 span = nat_port_max - nat_port_min + 1, port;

	if (try == 0 && bpf_ntohs(client) >= nat_port_min && bpf_ntohs(client) <= nat_port_max)
		port = bpf_ntohs(client);
	else if (try <= 1)
		port = nat_port_min + bpf_get_prandom_u32() % span;
	else
		port = *last == nat_port_max ? nat_port_min : *last + 1;
	*last = port;
	return bpf_htons(port);
}

/* flow_create's two new entries: too big for its stack frame beside the
 * callers'. */
struct flow_spare {
	struct flow_value orig;
	struct flow_value reply;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct flow_spare);
} flow_scratch SEC(".maps");

/* flow_create starts the flow of p toward c's backend, SNATed to snat
 * when it is not NULL (a remote backend), and returns its ORIG entry. NULL
 * when the map is full or no SNAT port is free; the event says which.
 * When another CPU created the same flow first, its entry is returned. */
static __noinline struct flow_value *flow_create(const struct pkt *p, const struct lb_choice *c, __u32 svc_id,
						 const __u8 *snat, __u32 ifindex)
{
	struct flow_spare *sc;
	struct flow_value *o, *r;
	struct flow_key ok, rk;
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	__u16 last = 0;
	int err = -1, i;

	sc = bpf_map_lookup_elem(&flow_scratch, &zero);
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
		err = bpf_map_update_elem(&flows, &rk, r, BPF_NOEXIST);
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
