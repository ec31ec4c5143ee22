// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* BPF_PROG_TEST_RUN cannot run cgroup sock_addr programs, but it runs
 * SEC("syscall") ones. These wrap the very lb.h functions the hooks call;
 * the Go tests load them with their maps replaced by the datapath's own. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "lb.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct test_ctx {
	struct lb_req req;
	/* lb_translate's answer; the boolean entry points (lb_revnat,
	 * lb_skip_netns) answer 0 or 1. Typed so that bpf2go emits the
	 * verdicts for the Go tests. */
	enum lb_verdict verdict;
	__u32 pad;
};

/* Socket-local storage needs a socket, which a test run has none of: the
 * wrappers keep each test socket's state in a hash keyed by its cookie, the
 * Go tests read it from there. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct sock_state);
} test_socks SEC(".maps");

/* A zeroed sock_state to create entries from: too big for the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_state);
} test_zero SEC(".maps");

static __always_inline struct sock_state *test_sock(__u64 cookie)
{
	struct sock_state *st = bpf_map_lookup_elem(&test_socks, &cookie);
	__u32 zero = 0;
	void *z;

	if (st)
		return st;
	z = bpf_map_lookup_elem(&test_zero, &zero);
	if (!z)
		return NULL;
	bpf_map_update_elem(&test_socks, &cookie, z, BPF_NOEXIST);
	return bpf_map_lookup_elem(&test_socks, &cookie);
}

/* lb.h's view of the socket: h is the request itself, which carries the
 * client and the test socket's cookie. */

static __always_inline __u64 lb_sock_client(void *h, const struct lb_req *req)
{
	return req->client;
}

static __always_inline struct sock_state *lb_sock_state_peek(void *h, const struct lb_req *req)
{
	return bpf_map_lookup_elem(&test_socks, &req->cookie);
}

static __always_inline struct sock_state *lb_sock_state_make(void *h, const struct lb_req *req)
{
	return test_sock(req->cookie);
}

static __always_inline __u64 lb_sock_cookie(void *h, const struct lb_req *req)
{
	return req->cookie;
}

static __always_inline __u64 lb_sock_cookie_peek(void *h, const struct lb_req *req)
{
	return req->cookie;
}

#define CTX_WORDS (sizeof(struct test_ctx) / sizeof(__u64))

/* The verifier only allows context loads and stores at a constant offset
 * from the context pointer itself, so copy word by word, unrolled, instead
 * of letting clang memcpy through a derived pointer. */
static __always_inline void ctx_load(struct test_ctx *dst, struct test_ctx *ctx)
{
	__u64 *d = (__u64 *)dst;
	volatile __u64 *s = (volatile __u64 *)ctx;

#pragma unroll
	for (int i = 0; i < CTX_WORDS; i++)
		d[i] = s[i];
}

static __always_inline void ctx_store(struct test_ctx *ctx, struct test_ctx *src)
{
	volatile __u64 *d = (volatile __u64 *)ctx;
	__u64 *s = (__u64 *)src;

#pragma unroll
	for (int i = 0; i < CTX_WORDS; i++)
		d[i] = s[i];
}

/* Each wrapper runs one lb.h entry point on the request in the context and
 * stores its answer in verdict. */
#define TEST_PROG(name, call)          \
	SEC("syscall")                 \
	int name(struct test_ctx *ctx) \
	{                              \
		struct test_ctx tc;    \
                                       \
		ctx_load(&tc, ctx);    \
		tc.verdict = (call);   \
		ctx_store(ctx, &tc);   \
		return 0;              \
	}

TEST_PROG(test_translate_connect, lb_translate(&tc.req, &tc.req, LB_COUNT_CONNECT))
TEST_PROG(test_translate_datagram, lb_translate(&tc.req, &tc.req, LB_COUNT_DATAGRAM))
TEST_PROG(test_skip_netns, lb_skip_netns(tc.req.client))
TEST_PROG(test_revnat, lb_reverse(&tc.req, &tc.req))
