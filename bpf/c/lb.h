/* The one translation function every hook and every test wrapper calls. It
 * works on a plain struct, not on a hook context, so SEC("syscall") programs
 * can run it under BPF_PROG_TEST_RUN exactly as connect4 runs it.
 */
#ifndef SOCKLB_LB_H
#define SOCKLB_LB_H

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

struct lb_req {
	__u8 addr[16]; /* in: destination; out: backend when LB_XLATED */
	__be16 port;
	__u8 proto;
	__u8 pad;
	__u32 backend_id; /* out */
	__u64 cookie;	  /* test runs only: which test socket's state (hooks use the socket's storage) */
	__u64 client;	  /* netns cookie: the client for sessionAffinity; 0 until lb_client asks */
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

	/* The agent creates the entry with the backend; a miss only means
	 * the backend is being removed. Per-CPU, so no atomics needed. */
	if (!st)
		return;
	if (what == LB_COUNT_CONNECT)
		st->connects++;
	else
		st->datagrams++;
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

/* lb_sticky returns the backend id of the client's endpoint for this
 * Service port while its affinity is fresh and the endpoint is a backend of
 * this frontend (copied to be), else 0. The entry may have been made through
 * another frontend of the port whose backends differ (externalTrafficPolicy
 * Local): then this frontend picks anew and the entry follows. */
static __always_inline __u32 lb_sticky(const struct svc_value *svc, __u64 client, __u64 now, struct backend *be)
{
	struct affinity_key ak = {};
	struct affinity_value *av, a;
	__u32 id;

	ak.client = client;
	ak.affinity_id = svc->affinity_id;
	av = bpf_map_lookup_elem(&affinity, &ak);
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

static __always_inline void lb_stick(__u32 affinity_id, __u64 client, const struct backend *be, __u64 now)
{
	struct affinity_key ak = {};
	struct affinity_value av = {};

	ak.client = client;
	ak.affinity_id = affinity_id;
	av.last_used = now;
	__builtin_memcpy(av.addr, be->addr, sizeof(av.addr));
	av.port = be->port;
	bpf_map_update_elem(&affinity, &ak, &av, BPF_ANY);
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
}

/* lb_pick returns a slot in [0, count): the high half of rand * count
 * (Lemire's multiply-shift), as uniform as rand % count (both are off by
 * at most count / 2^32) without a 64-bit division on every connect. */
static __always_inline __u32 lb_pick(__u32 count)
{
	return (__u32)(((__u64)bpf_get_prandom_u32() * count) >> 32);
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
	struct svc_key key = {};
	struct svc_value sv = {};
	struct backend be = {};
	__u32 id = 0, kept = 0, from_sock = 0;
	__u64 now = 0;
	int i, found = 0;

	__builtin_memcpy(key.addr, req->addr, sizeof(key.addr));
	key.port = req->port;
	key.proto = req->proto;
	if (!lb_local_key(&key, h, req))
		return LB_PASS;
	/* Only a datagram reuses the backend its socket kept; a connect
	 * starts afresh and needs the state only to record into. */
	if (what == LB_COUNT_DATAGRAM)
		st = lb_sock_state_peek(h, req);

	for (i = 0; i < LB_MAX_TRIES; i++) {
		if (!lb_service(&key, &sv))
			return LB_PASS;
		if (sv.count == 0)
			return (sv.flags & SVC_F_POLICY_DROP) ? LB_UNREACH : LB_REFUSE;
		id = 0;
		if (st && what == LB_COUNT_DATAGRAM)
			id = lb_sock_backend(st, &sv, &be);
		from_sock = id;
		if (!id && sv.affinity_timeout) {
			now = bpf_ktime_get_ns();
			id = lb_sticky(&sv, lb_client(h, req), now, &be);
		}
		kept = id;
		if (!id) {
			id = lb_slot(&sv, lb_pick(sv.count));
			if (!id || !lb_backend(id, &be))
				continue;
		}
		if (!lb_same_service(&key, &sv))
			continue;
		found = 1;
		break;
	}
	/* Only a writer flipping generations on every try gets here; refusing
	 * is honest (the service exists) and the client may retry. */
	if (!found)
		return LB_REFUSE;
	if (sv.affinity_timeout && !kept)
		lb_stick(sv.affinity_id, lb_client(h, req), &be, now);
	if (!from_sock) {
		if (!st)
			st = lb_sock_state_make(h, req);
		if (st)
			lb_sock_record(st, &sv, &be, req);
	}

	__builtin_memcpy(req->addr, be.addr, sizeof(req->addr));
	req->port = be.port;
	req->backend_id = id;
	lb_count(id, what);
	return LB_XLATED;
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

#endif
