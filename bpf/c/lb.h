/* The one translation function every hook and every test wrapper calls. It
 * works on a plain struct, not on a hook context, so SEC("syscall") programs
 * can run it under BPF_PROG_TEST_RUN exactly as connect4 runs it.
 */
#ifndef SOCKLB_LB_H
#define SOCKLB_LB_H

#include <linux/in.h>

#include "addr.h"
#include "maps.h"

#define SOCKLB_ECONNREFUSED 111
#define SOCKLB_EHOSTUNREACH 113
#define NSEC_PER_SEC 1000000000ULL

/* A reader that loses a race with a generation flip finds its old slot or
 * backend deleted; by then the new generation is complete, so re-reading the
 * service entry succeeds. Each retry needs another writer flip to fail. */
#define LB_MAX_TRIES 4

enum lb_verdict {
	LB_PASS = 0,   /* not a service: leave the destination alone */
	LB_XLATED = 1, /* req->addr/port now hold the chosen backend */
	LB_REFUSE = 2, /* a service with no endpoints: REJECT, ECONNREFUSED */
	LB_UNREACH = 3, /* endpoints exist, none allowed here: EHOSTUNREACH */
};

enum lb_count {
	LB_COUNT_CONNECT = 0,
	LB_COUNT_DATAGRAM = 1,
};

/* lb_req.flags */
#define LB_REQ_BY_ADDR 0x1 /* the client is src (a packet), not the socket's netns */

struct lb_req {
	__u8 addr[16]; /* in: destination; out: backend when LB_XLATED */
	__be16 port;
	__u8 proto;
	__u8 flags;	  /* LB_REQ_* */
	__u32 backend_id; /* out */
	__u64 cookie;	  /* test runs only: which test socket's state (hooks use the socket's storage) */
	__u64 client;	  /* netns cookie: the client for sessionAffinity; 0 until lb_client asks */
	__u8 src[16];	  /* the source address, with LB_REQ_BY_ADDR */
};

/* What lb.h needs from the socket it translates for, defined by the file
 * that includes it: the hooks read their context, the test wrappers their
 * request. h is that context. They are asked for only when needed: a
 * connect that is no Service's, or a Service without sessionAffinity, never
 * pays for the netns cookie or for allocating socket storage (which every
 * pod-to-pod connect in the cgroup would otherwise do). */
static __always_inline __u64 lb_sock_client(void *h, const struct lb_req *req);
/* The socket's state if it has any; lb_sock_state_make creates it. */
static __always_inline struct sock_state *lb_sock_state_peek(void *h, const struct lb_req *req);
static __always_inline struct sock_state *lb_sock_state_make(void *h, const struct lb_req *req);
/* The socket's cookie, the key of its sock_conns entry; lb_sock_cookie_peek
 * is 0 when the socket has none yet, which no socket the hooks recorded
 * lacks (recording takes it). */
static __always_inline __u64 lb_sock_cookie(void *h, const struct lb_req *req);
static __always_inline __u64 lb_sock_cookie_peek(void *h, const struct lb_req *req);

/* lb_client is the client's netns cookie, fetched once. A namespace's
 * cookie is never 0, so 0 means not fetched yet. */
static __always_inline __u64 lb_client(void *h, struct lb_req *req)
{
	if (!req->client)
		req->client = lb_sock_client(h, req);
	return req->client;
}

/* Set at load time by the agent (--socket-lb-hostns-only): translate only
 * for sockets of the host's network namespace, leaving pods to a sidecar
 * proxy (Istio, Kata, KubeVirt), as Cilium's socketLB.hostNamespaceOnly. */
volatile const __u8 hostns_only = 0;
volatile const __u64 host_netns_cookie = 0;

static __always_inline int lb_skip_netns(__u64 netns_cookie)
{
	return hostns_only && netns_cookie != host_netns_cookie;
}

/* lb_local_key decides where a loopback destination is looked up. Localhost
 * NodePorts (kube-proxy's route_localnet rules, matched with --dst-type
 * LOCAL: all of 127.0.0.0/8) exist only in the host's network namespace;
 * inside a pod 127.0.0.1:<nodePort> is the pod's own loopback, and a pod's
 * own listener there must keep working. The agent programs them as
 * 127.0.0.1 (and ::1). Returns 0 when the destination is to be left alone.
 * host_netns_cookie 0 means unknown (no SO_NETNS_COOKIE): every namespace
 * is then taken for the host's. */
static __always_inline int lb_local_key(struct svc_key *key, void *h, struct lb_req *req)
{
	__u32 *w = (__u32 *)key->addr;

	if (addr_is_v4(key->addr)) {
		if ((bpf_ntohl(w[3]) >> 24) != 127)
			return 1;
		w[3] = bpf_htonl(0x7f000001);
	} else if (w[0] != 0 || w[1] != 0 || w[2] != 0 || w[3] != bpf_htonl(1)) {
		return 1;
	}
	return !host_netns_cookie || lb_client(h, req) == host_netns_cookie;
}

static __always_inline void lb_count(__u32 backend_id, enum lb_count what)
{
	struct backend_stats *st = bpf_map_lookup_elem(&stats, &backend_id);

	/* NULL only for an id past the array, which the agent never hands
	 * out. One slot is shared by every CPU. */
	if (!st)
		return;
	if (what == LB_COUNT_CONNECT)
		__sync_fetch_and_add(&st->connects, 1);
	else
		__sync_fetch_and_add(&st->datagrams, 1);
}

/* The readers below copy a map value once and check the copy belongs to
 * the key they looked up: an element can be reused for another key while a
 * hook holds it (maps.h, "Recycled elements"). A failed check reads as a
 * miss, and a miss retries against a fresh service entry. */

static __always_inline int lb_service(const struct svc_key *key, struct svc_value *sv)
{
	struct svc_value *v = bpf_map_lookup_elem(&services, key);

	if (!v)
		return 0;
	*sv = *v;
	return 1;
}

/* lb_node_addr returns addr's node_addrs flags: NODE_ADDR_LOCAL for this
 * node's NodePort addresses, NODE_ADDR_REMOTE for another node's, 0 for
 * any other address. */
static __always_inline __u32 lb_node_addr(const __u8 addr[16])
{
	struct node_addr_key k;
	enum node_addr_flag *f;

	__builtin_memcpy(k.addr, addr, sizeof(k.addr));
	f = bpf_map_lookup_elem(&node_addrs, &k);
	return f ? *f : 0;
}

/* lb_nodeport finds the NodePort frontend of a node address that had no
 * frontend of its own (key, copied to sv; node is its lb_node_addr): NodePorts are one frontend per
 * port at the unspecified address of the family, and key is turned into
 * that one, so the retries and lb_same_service look up the same entry.
 * This node's addresses reach every NodePort; another node's (a socket
 * reaching its NodePort without crossing to it, as Cilium's socket LB
 * does) only those not SVC_F_LOCAL_NODE_ONLY. kube-proxy's KUBE-NODEPORTS
 * is likewise matched after every other rule of KUBE-SERVICES. */
static __always_inline int lb_nodeport(struct svc_key *key, struct svc_value *sv, __u32 node)
{
	__u32 *w = (__u32 *)key->addr;

	if (!node)
		return 0;
	w[3] = 0;
	if (!addr_is_v4(key->addr))
		w[0] = w[1] = w[2] = 0;
	if (!lb_service(key, sv) || sv->kind != SVC_KIND_NODE_PORT)
		return 0;
	return (node & NODE_ADDR_LOCAL) || !(sv->flags & SVC_F_LOCAL_NODE_ONLY);
}

/* lb_frontend finds the frontend of key, copied to sv: its own, else a
 * NodePort's (lb_nodeport). */
static __always_inline int lb_frontend(struct svc_key *key, struct svc_value *sv)
{
	/* The wildcard entries are reached only through lb_nodeport: a
	 * connect to the unspecified address itself means this host (or a
	 * pod's own loopback), never a NodePort. */
	if (addr_is_unset(key->addr))
		return 0;
	if (lb_service(key, sv))
		return 1;
	return lb_nodeport(key, sv, lb_node_addr(key->addr));
}

/* lb_src_allowed applies loadBalancerSourceRanges to a source address, for
 * packets from other machines and sockets on the node alike: kube-proxy's
 * KUBE-FW chain accepts the listed sources and KUBE-PROXY-FIREWALL drops
 * the rest. */
static __always_inline int lb_src_allowed(const struct svc_value *sv, const __u8 src[16])
{
	struct src_range_key k;

	if (!(sv->flags & SVC_F_SRC_RANGES))
		return 1;
	k.prefixlen = 32 + 128;
	k.svc_id = sv->svc_id;
	__builtin_memcpy(k.addr, src, 16);
	return bpf_map_lookup_elem(&src_ranges, &k) != NULL;
}

/* lb_same_service re-reads the entry after the slot and backend were read:
 * a copy taken from an element recycled for another frontend has that
 * frontend's svc id, which ids being unique per frontend tells apart. */
static __always_inline int lb_same_service(const struct svc_key *key, const struct svc_value *sv)
{
	struct svc_value now;

	return lb_service(key, &now) && now.svc_id == sv->svc_id;
}

/* lb_slot returns the backend id in slot of sv's generation, or 0. */
static __always_inline __u32 lb_slot(const struct svc_value *sv, __u32 slot)
{
	struct slot_key sk = {};
	struct slot_value *v, s;

	sk.svc_id = sv->svc_id;
	sk.generation = sv->generation;
	sk.slot = slot;
	v = bpf_map_lookup_elem(&slots, &sk);
	if (!v)
		return 0;
	s = *v;
	if (s.svc_id != sk.svc_id || s.generation != sk.generation)
		return 0;
	return s.backend_id;
}

static __always_inline int lb_backend(__u32 id, struct backend *be)
{
	struct backend *v = bpf_map_lookup_elem(&backends, &id);

	if (!v)
		return 0;
	*be = *v;
	return be->id == id;
}

/* lb_member copies the backend of endpoint addr:port in sv's Service to be
 * and returns its id; 0 when the endpoint is not, or no longer, one of the
 * Service's backends. The copy must name that endpoint: members' value may
 * be recycled too. */
static __always_inline __u32 lb_member(const struct svc_value *sv, const __u8 addr[16], __be16 port,
				       struct backend *be)
{
	struct member_key mk = {};
	__u32 *v, id;

	mk.svc_id = sv->svc_id;
	mk.port = port;
	__builtin_memcpy(mk.addr, addr, sizeof(mk.addr));
	v = bpf_map_lookup_elem(&members, &mk);
	if (!v)
		return 0;
	id = *v;
	if (!lb_backend(id, be) || be->port != port || !addr_eq(be->addr, addr))
		return 0;
	return id;
}

/* lb_client_netns makes the affinity key of a socket's client, its
 * network namespace; lb_client_addr that of a packet's source address. */
static __always_inline void lb_client_netns(struct affinity_key *ak, __u64 netns_cookie)
{
	__builtin_memset(ak, 0, sizeof(*ak));
	__builtin_memcpy(ak->client, &netns_cookie, sizeof(netns_cookie));
	ak->by = AFFINITY_BY_NETNS;
}

static __always_inline void lb_client_addr(struct affinity_key *ak, const __u8 addr[16])
{
	__builtin_memset(ak, 0, sizeof(*ak));
	__builtin_memcpy(ak->client, addr, sizeof(ak->client));
	ak->by = AFFINITY_BY_ADDR;
}

/* lb_sticky returns the backend id of the client's endpoint for this
 * Service port while its affinity is fresh and the endpoint is a backend of
 * this frontend (copied to be), else 0. The entry may have been made through
 * another frontend of the port whose backends differ (externalTrafficPolicy
 * Local): then this frontend picks anew and the entry follows. */
static __always_inline __u32 lb_sticky(const struct svc_value *svc, struct affinity_key *ak, __u64 now,
				       struct backend *be)
{
	struct affinity_value *av, a;
	__u32 id;

	ak->affinity_id = svc->affinity_id;
	av = bpf_map_lookup_elem(&affinity, ak);
	if (!av)
		return 0;
	a = *av;
	if (now - a.last_used > (__u64)svc->affinity_timeout * NSEC_PER_SEC)
		return 0;
	id = lb_member(svc, a.addr, a.port, be);
	if (!id)
		return 0;
	/* In place: the timeout runs from the client's last connection. */
	av->last_used = now;
	return id;
}

static __always_inline void lb_stick(const struct svc_value *svc, struct affinity_key *ak, const struct backend *be,
				     __u64 now)
{
	struct affinity_value av = {};

	ak->affinity_id = svc->affinity_id;
	av.last_used = now;
	__builtin_memcpy(av.addr, be->addr, sizeof(av.addr));
	av.port = be->port;
	bpf_map_update_elem(&affinity, ak, &av, BPF_ANY);
}

static __always_inline void lb_event(__u32 ev)
{
	__u64 *n = bpf_map_lookup_elem(&sock_events, &ev);

	if (n)
		(*n)++;
}

/* lb_sock_find returns the index of st's entry for a Service port, or -1. */
static __always_inline int lb_sock_find(const struct sock_state *st, __u32 affinity_id)
{
#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++)
		if (st->e[i].affinity_id == affinity_id)
			return i;
	return -1;
}

/* lb_sock_backend returns the backend this socket already sends to for sv's
 * Service port, while that endpoint is still one of sv's backends (copied
 * to be), else 0. The entry is copied first: threads sharing the socket may
 * be rewriting it. */
static __always_inline __u32 lb_sock_backend(const struct sock_state *st, const struct svc_value *sv,
					     struct backend *be)
{
	struct sock_entry e;
	int i = lb_sock_find(st, sv->affinity_id);

	if (i < 0)
		return 0;
	e = st->e[i & (SOCK_ENTRIES - 1)];
	if (e.affinity_id != sv->affinity_id)
		return 0;
	return lb_member(sv, e.backend, e.backend_port, be);
}

/* lb_sock_record notes that the socket now sends sv's Service port to be,
 * taking the port's entry, else the next one round robin. */
static __always_inline void lb_sock_record(struct sock_state *st, const struct svc_value *sv,
					   const struct backend *be, const struct lb_req *req)
{
	struct sock_entry *e;
	int i = lb_sock_find(st, sv->affinity_id);

	if (i < 0) {
		i = st->next++;
		e = &st->e[i & (SOCK_ENTRIES - 1)];
		if (e->affinity_id)
			lb_event(SOCK_EV_EVICTED);
	} else {
		e = &st->e[i & (SOCK_ENTRIES - 1)];
	}
	__builtin_memcpy(e->backend, be->addr, sizeof(e->backend));
	__builtin_memcpy(e->frontend, req->addr, sizeof(e->frontend));
	e->backend_port = be->port;
	e->frontend_port = req->port;
	e->affinity_id = sv->affinity_id;
	if (sv->flags & SVC_F_SRC_RANGES)
		st->src_check = 1;
}

/* lb_conn_record notes that the connected TCP socket cookie now sends to
 * be, having asked for req's destination: one LRU write, no allocation. */
static __always_inline void lb_conn_record(__u64 cookie, const struct svc_value *sv, const struct backend *be,
					   const struct lb_req *req)
{
	struct sock_entry e;

	__builtin_memcpy(e.backend, be->addr, sizeof(e.backend));
	__builtin_memcpy(e.frontend, req->addr, sizeof(e.frontend));
	e.backend_port = be->port;
	e.frontend_port = req->port;
	e.affinity_id = sv->affinity_id;
	if (bpf_map_update_elem(&sock_conns, &cookie, &e, BPF_ANY))
		lb_event(SOCK_EV_NO_STATE);
}

/* lb_records_conn says whether a translated socket's state goes to
 * sock_conns: a TCP connect, unless the egress hook must check the
 * socket's packets against source ranges (it finds sockets by their
 * storage). */
static __always_inline int lb_records_conn(const struct lb_req *req, const struct svc_value *sv, enum lb_count what)
{
	return what == LB_COUNT_CONNECT && req->proto == IPPROTO_TCP && !(sv->flags & SVC_F_SRC_RANGES);
}

/* lb_pick returns a slot in [0, count): the high half of rand * count
 * (Lemire's multiply-shift), as uniform as rand % count (both are off by
 * at most count / 2^32) without a 64-bit division on every connect. */
static __always_inline __u32 lb_pick(__u32 count)
{
	return (__u32)(((__u64)bpf_get_prandom_u32() * count) >> 32);
}

/* lb_affinity_client makes the affinity key of req's client: its source
 * address for a packet from another machine, its network namespace for a
 * socket (fetched only now, when a Service with affinity asks for it). */
static __always_inline void lb_affinity_client(struct affinity_key *ak, void *h, struct lb_req *req)
{
	if (req->flags & LB_REQ_BY_ADDR)
		lb_client_addr(ak, req->src);
	else
		lb_client_netns(ak, lb_client(h, req));
}

/* What lb_choose picked. */
struct lb_choice {
	struct backend be;
	__u32 id;
	__u8 from_sock; /* the backend the socket already sends this Service port to */
	__u8 kept;	/* ... or the client's sessionAffinity endpoint */
	__u16 pad;
	__u64 now;	/* when affinity was read, 0 if it was not */
	struct affinity_key ak;
};

/* lb_choose picks a backend of the frontend key (found as sv) for req: the
 * one st (the socket's state, NULL for packets) keeps for this Service port,
 * else the client's sessionAffinity endpoint, else a random slot. A reader
 * that loses a race with a generation flip re-reads the service entry. The
 * policy is the one for sockets and packets alike; only who the client is
 * differs (lb_affinity_client). */
static __always_inline int lb_choose(const struct svc_key *key, struct svc_value *sv, struct lb_req *req, void *h,
				     const struct sock_state *st, struct lb_choice *c)
{
	__u32 id;
	int i;

	for (i = 0; i < LB_MAX_TRIES; i++) {
		if (i > 0 && !lb_service(key, sv))
			return LB_PASS;
		if (sv->count == 0)
			return (sv->flags & SVC_F_POLICY_DROP) ? LB_UNREACH : LB_REFUSE;
		id = 0;
		if (st)
			id = lb_sock_backend(st, sv, &c->be);
		c->from_sock = id != 0;
		if (!id && sv->affinity_timeout) {
			c->now = bpf_ktime_get_ns();
			lb_affinity_client(&c->ak, h, req);
			id = lb_sticky(sv, &c->ak, c->now, &c->be);
		}
		c->kept = id != 0;
		if (!id) {
			id = lb_slot(sv, lb_pick(sv->count));
			if (!id || !lb_backend(id, &c->be))
				continue;
		}
		if (!lb_same_service(key, sv))
			continue;
		c->id = id;
		/* A new choice under sessionAffinity is the client's from now
		 * on (lb_sticky above made c->ak and c->now). */
		if (sv->affinity_timeout && !c->kept)
			lb_stick(sv, &c->ak, &c->be, c->now);
		return LB_XLATED;
	}
	/* Only a writer flipping generations on every try gets here; refusing
	 * is honest (the service exists) and the client may retry. */
	return LB_REFUSE;
}

/* lb_translate picks a backend for req, the socket being h (see
 * lb_sock_state_peek). An unconnected UDP socket keeps one backend per
 * Service port while that backend stays in the Service, as one conntrack
 * flow does under kube-proxy (QUIC and DTLS over unconnected sockets rely on
 * it); Cilium keys the same by socket cookie. The socket's state is created
 * only once a Service is hit: getpeername, recvmsg and the socket iterators
 * find nothing in it for any other socket anyway. */
static __always_inline int lb_translate(struct lb_req *req, void *h, enum lb_count what)
{
	struct sock_state *st = NULL;
	struct lb_choice c = {};
	struct svc_key key = {};
	struct svc_value sv = {};
	int v;

	__builtin_memcpy(key.addr, req->addr, sizeof(key.addr));
	key.port = req->port;
	key.proto = req->proto;
	if (!lb_local_key(&key, h, req))
		return LB_PASS;
	if (!lb_frontend(&key, &sv))
		return LB_PASS;
	/* Only a datagram reuses the backend its socket kept; a connect
	 * starts afresh and needs the state only to record into. */
	if (what == LB_COUNT_DATAGRAM)
		st = lb_sock_state_peek(h, req);
	v = lb_choose(&key, &sv, req, h, st, &c);
	if (v != LB_XLATED)
		return v;
	if (lb_records_conn(req, &sv, what)) {
		lb_conn_record(lb_sock_cookie(h, req), &sv, &c.be, req);
	} else if (!c.from_sock) {
		if (!st)
			st = lb_sock_state_make(h, req);
		if (st)
			lb_sock_record(st, &sv, &c.be, req);
	}

	__builtin_memcpy(req->addr, c.be.addr, sizeof(req->addr));
	req->port = c.be.port;
	req->backend_id = c.id;
	lb_count(c.id, what);
	return LB_XLATED;
}

/* lb_revnat_conn rewrites a connected TCP socket's backend address back
 * to the frontend it asked for, from its sock_conns entry. Returns 1 when
 * it did. */
static __always_inline int lb_revnat_conn(struct lb_req *req, __u64 cookie)
{
	struct sock_entry *v, e;

	if (!cookie)
		return 0;
	v = bpf_map_lookup_elem(&sock_conns, &cookie);
	if (!v)
		return 0;
	e = *v;
	if (e.backend_port != req->port || !addr_eq(e.backend, req->addr))
		return 0;
	__builtin_memcpy(req->addr, e.frontend, sizeof(req->addr));
	req->port = e.frontend_port;
	return 1;
}

/* lb_revnat rewrites a backend address back to the frontend the socket
 * asked for, from the socket's state (NULL: nothing to rewrite). Returns 1
 * when it did. */
static __always_inline int lb_revnat(struct lb_req *req, const struct sock_state *st)
{
	struct sock_entry e;

	if (!st)
		return 0;
#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++) {
		e = st->e[i];
		if (!e.affinity_id || e.backend_port != req->port || !addr_eq(e.backend, req->addr))
			continue;
		__builtin_memcpy(req->addr, e.frontend, sizeof(req->addr));
		req->port = e.frontend_port;
		return 1;
	}
	return 0;
}

/* lb_reverse is what getpeername and recvmsg show for req, the socket's
 * peer: a TCP socket's sock_conns entry, else its socket storage (UDP, TCP
 * through source ranges, and TCP sockets connected by an agent from before
 * sock_conns). */
static __always_inline int lb_reverse(struct lb_req *req, void *h)
{
	if (req->proto == IPPROTO_TCP && lb_revnat_conn(req, lb_sock_cookie_peek(h, req)))
		return 1;
	return lb_revnat(req, lb_sock_state_peek(h, req));
}

#endif
