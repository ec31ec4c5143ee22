// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The cgroup sock_addr hooks. Each is a thin wrapper: copy the socket's
 * destination into an lb_req, call lb.h, copy the answer back. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "addr.h"
#include "kernel_types.h"
#include "lb.h"
#include "srccheck.h"

char __license[] SEC("license") = "Dual BSD/GPL";

#define SYS_REJECT 0
#define SYS_PROCEED 1

static __always_inline void req_from_ctx4(struct lb_req *req, struct bpf_sock_addr *ctx)
{
	addr_from_v4(req->addr, ctx->user_ip4);
	req->port = (__be16)ctx->user_port;
	req->proto = (__u8)ctx->protocol;
}

/* An AF_INET6 socket may connect to an IPv4 service through a v4-mapped
 * address; the maps store IPv4 v4-mapped, so the lookup is the same. */
static __always_inline void req_from_ctx6(struct lb_req *req, struct bpf_sock_addr *ctx)
{
	__u32 *w = (__u32 *)req->addr;

	w[0] = ctx->user_ip6[0];
	w[1] = ctx->user_ip6[1];
	w[2] = ctx->user_ip6[2];
	w[3] = ctx->user_ip6[3];
	req->port = (__be16)ctx->user_port;
	req->proto = (__u8)ctx->protocol;
}

/* lb.h's view of the socket: h is the hook's context. */

static __always_inline __u64 lb_sock_client(void *h, const struct lb_req *req)
{
	return bpf_get_netns_cookie((struct bpf_sock_addr *)h);
}

/* The socket's state if socklb ever translated for it: replies to other
 * sockets cost one lookup and no allocation. */
static __always_inline struct sock_state *lb_sock_state_peek(void *h, const struct lb_req *req)
{
	struct bpf_sock *sk = ((struct bpf_sock_addr *)h)->sk;

	if (!sk)
		return NULL;
	return bpf_sk_storage_get(&sk_state, sk, 0, 0);
}

static __always_inline struct sock_state *lb_sock_state_make(void *h, const struct lb_req *req)
{
	struct bpf_sock *sk = ((struct bpf_sock_addr *)h)->sk;
	struct sock_state *st;

	if (!sk)
		return NULL;
	st = bpf_sk_storage_get(&sk_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		lb_event(SOCK_EV_NO_STATE);
	return st;
}

static __always_inline __u64 lb_sock_cookie(void *h, const struct lb_req *req)
{
	return bpf_get_socket_cookie((struct bpf_sock_addr *)h);
}

/* tcp_cookie_peek is a TCP socket's cookie if it has one, else 0, without
 * making one: bpf_get_socket_cookie would make it, and looking a fresh
 * cookie up in sock_conns is a cold hash bucket on every getpeername and
 * close of the sockets socklb never translated (most of them: pod-to-pod).
 * The read goes through the kernel's struct sock (BTF), 0 for a socket
 * that is not a full TCP one. */
static __always_inline __u64 tcp_cookie_peek(struct bpf_sock *sk)
{
	struct sock *s;

	if (!sk)
		return 0;
	s = (struct sock *)bpf_skc_to_tcp_sock(sk);
	if (!s)
		return 0;
	return s->__sk_common.skc_cookie.counter;
}

static __always_inline __u64 lb_sock_cookie_peek(void *h, const struct lb_req *req)
{
	return tcp_cookie_peek(((struct bpf_sock_addr *)h)->sk);
}

/* Set at load time: whether the kernel has bpf_set_retval (Linux 5.18).
 * When it is 0 the verifier never visits the calls below, so the programs
 * load on older kernels, where a rejected connect() fails with EPERM. */
volatile const __u8 have_set_retval = 1;

/* verdict turns lb.h's answer into what the syscall returns. */
static __always_inline int verdict(int v)
{
	switch (v) {
	case LB_REFUSE:
		/* kube-proxy REJECTs with icmp-port-unreachable, which a TCP
		 * client sees as ECONNREFUSED: give the same answer. */
		if (have_set_retval)
			bpf_set_retval(-SOCKLB_ECONNREFUSED);
		return SYS_REJECT;
	case LB_UNREACH:
		/* kube-proxy DROPs: the client would time out. Say at once
		 * that no endpoint is reachable from here. */
		if (have_set_retval)
			bpf_set_retval(-SOCKLB_EHOSTUNREACH);
		return SYS_REJECT;
	}
	return SYS_PROCEED;
}

static __always_inline int xlate4(struct bpf_sock_addr *ctx, enum lb_count what)
{
	struct lb_req req = {};
	int v;

	req_from_ctx4(&req, ctx);
	/* hostns_only is a load-time constant: without it the verifier drops
	 * the branch and the cookie is fetched only if lb.h asks. */
	if (hostns_only && lb_skip_netns(lb_client(ctx, &req)))
		return SYS_PROCEED;
	v = lb_translate(&req, ctx, what);
	/* Services of one family have backends of that family; an IPv6
	 * backend cannot be reached from an AF_INET socket. */
	if (v == LB_XLATED && addr_is_v4(req.addr)) {
		ctx->user_ip4 = addr_to_v4(req.addr);
		ctx->user_port = req.port;
	}
	return verdict(v);
}

static __always_inline int xlate6(struct bpf_sock_addr *ctx, enum lb_count what)
{
	struct lb_req req = {};
	__u32 *w = (__u32 *)req.addr;
	int v;

	req_from_ctx6(&req, ctx);
	if (hostns_only && lb_skip_netns(lb_client(ctx, &req)))
		return SYS_PROCEED;
	v = lb_translate(&req, ctx, what);
	if (v == LB_XLATED) {
		ctx->user_ip6[0] = w[0];
		ctx->user_ip6[1] = w[1];
		ctx->user_ip6[2] = w[2];
		ctx->user_ip6[3] = w[3];
		ctx->user_port = req.port;
	}
	return verdict(v);
}

static __always_inline int revnat4(struct bpf_sock_addr *ctx)
{
	struct lb_req req = {};

	req_from_ctx4(&req, ctx);
	if (lb_reverse(&req, ctx)) {
		ctx->user_ip4 = addr_to_v4(req.addr);
		ctx->user_port = req.port;
	}
	return SYS_PROCEED;
}

static __always_inline int revnat6(struct bpf_sock_addr *ctx)
{
	struct lb_req req = {};
	__u32 *w = (__u32 *)req.addr;

	req_from_ctx6(&req, ctx);
	if (lb_reverse(&req, ctx)) {
		ctx->user_ip6[0] = w[0];
		ctx->user_ip6[1] = w[1];
		ctx->user_ip6[2] = w[2];
		ctx->user_ip6[3] = w[3];
		ctx->user_port = req.port;
	}
	return SYS_PROCEED;
}

SEC("cgroup/connect4")
int socklb_connect4(struct bpf_sock_addr *ctx) { return xlate4(ctx, LB_COUNT_CONNECT); }

SEC("cgroup/sendmsg4")
int socklb_sendmsg4(struct bpf_sock_addr *ctx) { return xlate4(ctx, LB_COUNT_DATAGRAM); }

SEC("cgroup/recvmsg4")
int socklb_recvmsg4(struct bpf_sock_addr *ctx) { return revnat4(ctx); }

SEC("cgroup/getpeername4")
int socklb_getpeername4(struct bpf_sock_addr *ctx) { return revnat4(ctx); }

SEC("cgroup/connect6")
int socklb_connect6(struct bpf_sock_addr *ctx) { return xlate6(ctx, LB_COUNT_CONNECT); }

SEC("cgroup/sendmsg6")
int socklb_sendmsg6(struct bpf_sock_addr *ctx) { return xlate6(ctx, LB_COUNT_DATAGRAM); }

SEC("cgroup/recvmsg6")
int socklb_recvmsg6(struct bpf_sock_addr *ctx) { return revnat6(ctx); }

SEC("cgroup/getpeername6")
int socklb_getpeername6(struct bpf_sock_addr *ctx) { return revnat6(ctx); }

/* A closing TCP socket's sock_conns entry goes with it, so the LRU holds
 * open sockets only and never evicts one for a closed one. 1 lets the
 * close proceed (it cannot be refused anyway). */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/* Set at load time: whether the kernel has bpf_cast_to_kern_ctx (6.2). */
volatile const __u8 have_kern_ctx = 1;

SEC("cgroup/sock_release")
int socklb_sock_release(struct bpf_sock *sk)
{
	__u64 cookie;

	if (sk->protocol != IPPROTO_TCP)
		return 1;
	/* A socket with no cookie was never recorded (recording takes it),
	 * and most sockets closing were never translated: the kernel's own
	 * socket says so without making one. Without the kfunc the cookie is
	 * made, and looked up. A lookup takes no lock; a delete takes the
	 * bucket's whether or not the key is there. */
	if (have_kern_ctx)
		cookie = ((struct sock *)bpf_cast_to_kern_ctx(sk))->__sk_common.skc_cookie.counter;
	else
		cookie = bpf_get_socket_cookie(sk);
	if (cookie && bpf_map_lookup_elem(&sock_conns, &cookie))
		bpf_map_delete_elem(&sock_conns, &cookie);
	return 1;
}

/* Not a sock_addr hook: the source address exists only once the packet
 * does. 1 lets the packet go. */
SEC("cgroup_skb/egress")
int socklb_egress(struct __sk_buff *skb) { return srccheck_pass(skb); }
