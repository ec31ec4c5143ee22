/* The one translation function every hook and every test wrapper calls. It
 * works on a plain struct, not on a hook context, so SEC("syscall") programs
 * can run it under BPF_PROG_TEST_RUN exactly as connect4 runs it.
 */
#ifndef SOCKLB_LB_H
#define SOCKLB_LB_H

#include "maps.h"

#define SOCKLB_ECONNREFUSED 111

/* A reader that loses a race with a generation flip finds its old slot or
 * backend deleted; by then the new generation is complete, so re-reading the
 * service entry succeeds. Each retry needs another writer flip to fail. */
#define LB_MAX_TRIES 4

enum lb_verdict {
	LB_PASS = 0,   /* not a service: leave the destination alone */
	LB_XLATED = 1, /* req->addr/port now hold the chosen backend */
	LB_REFUSE = 2, /* a service with no usable backend: REJECT */
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
	__u64 cookie;	  /* socket cookie: keys the reverse translation */
};

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

static __always_inline int lb_translate(struct lb_req *req, enum lb_count what)
{
	struct svc_key key = {};
	struct revnat_key rkey = {};
	struct revnat_value rval = {};
	struct svc_value *svc;
	struct backend *be = NULL;
	__u32 *backend_id = NULL;
	__u32 svc_id = 0;
	int i;

	__builtin_memcpy(key.addr, req->addr, sizeof(key.addr));
	key.port = req->port;
	key.proto = req->proto;

	for (i = 0; i < LB_MAX_TRIES; i++) {
		struct slot_key sk = {};
		__u32 count;

		svc = bpf_map_lookup_elem(&services, &key);
		if (!svc)
			return LB_PASS;
		count = svc->count;
		if (count == 0)
			return LB_REFUSE;
		sk.svc_id = svc->svc_id;
		sk.generation = svc->generation;
		sk.slot = bpf_get_prandom_u32() % count;
		backend_id = bpf_map_lookup_elem(&slots, &sk);
		if (!backend_id)
			continue;
		be = bpf_map_lookup_elem(&backends, backend_id);
		if (be) {
			svc_id = sk.svc_id;
			break;
		}
	}
	/* Only a writer flipping generations on every try gets here; refusing
	 * is honest (the service exists) and the client may retry. */
	if (!be || !backend_id)
		return LB_REFUSE;

	rkey.cookie = req->cookie;
	__builtin_memcpy(rkey.addr, be->addr, sizeof(rkey.addr));
	rkey.port = be->port;
	__builtin_memcpy(rval.addr, req->addr, sizeof(rval.addr));
	rval.port = req->port;
	rval.svc_id = svc_id;
	bpf_map_update_elem(&revnat, &rkey, &rval, BPF_ANY);

	__builtin_memcpy(req->addr, be->addr, sizeof(req->addr));
	req->port = be->port;
	req->backend_id = *backend_id;
	lb_count(req->backend_id, what);
	return LB_XLATED;
}

/* lb_revnat rewrites a backend address back to the frontend the socket
 * asked for. Returns 1 when it did. */
static __always_inline int lb_revnat(struct lb_req *req)
{
	struct revnat_key rkey = {};
	struct revnat_value *rval;

	rkey.cookie = req->cookie;
	__builtin_memcpy(rkey.addr, req->addr, sizeof(rkey.addr));
	rkey.port = req->port;
	rval = bpf_map_lookup_elem(&revnat, &rkey);
	if (!rval)
		return 0;
	__builtin_memcpy(req->addr, rval->addr, sizeof(req->addr));
	req->port = rval->port;
	return 1;
}

#endif
