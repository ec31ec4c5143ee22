// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The cgroup sock_addr hooks. Each is a thin wrapper: copy the socket's
 * destination into an lb_req, call lb.h, copy the answer back. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "addr.h"
#include "lb.h"

char __license[] SEC("license") = "Dual BSD/GPL";

#define SYS_REJECT 0
#define SYS_PROCEED 1

static __always_inline void req_from_ctx4(struct lb_req *req, struct bpf_sock_addr *ctx)
{
	addr_from_v4(req->addr, ctx->user_ip4);
	req->port = (__be16)ctx->user_port;
	req->proto = (__u8)ctx->protocol;
	req->cookie = bpf_get_socket_cookie(ctx);
}

static __always_inline int xlate4(struct bpf_sock_addr *ctx, enum lb_count what)
{
	struct lb_req req = {};

	req_from_ctx4(&req, ctx);
	switch (lb_translate(&req, what)) {
	case LB_XLATED:
		/* Services of one family have backends of that family; an
		 * IPv6 backend cannot be reached from an AF_INET socket. */
		if (!addr_is_v4(req.addr))
			break;
		ctx->user_ip4 = addr_to_v4(req.addr);
		ctx->user_port = req.port;
		break;
	case LB_REFUSE:
		/* kube-proxy REJECTs with icmp-port-unreachable, which a TCP
		 * client sees as ECONNREFUSED: give the same answer. */
		bpf_set_retval(-SOCKLB_ECONNREFUSED);
		return SYS_REJECT;
	}
	return SYS_PROCEED;
}

SEC("cgroup/connect4")
int socklb_connect4(struct bpf_sock_addr *ctx)
{
	return xlate4(ctx, LB_COUNT_CONNECT);
}

SEC("cgroup/sendmsg4")
int socklb_sendmsg4(struct bpf_sock_addr *ctx)
{
	return xlate4(ctx, LB_COUNT_DATAGRAM);
}

static __always_inline int revnat4(struct bpf_sock_addr *ctx)
{
	struct lb_req req = {};

	req_from_ctx4(&req, ctx);
	if (lb_revnat(&req)) {
		ctx->user_ip4 = addr_to_v4(req.addr);
		ctx->user_port = req.port;
	}
	return SYS_PROCEED;
}

SEC("cgroup/recvmsg4")
int socklb_recvmsg4(struct bpf_sock_addr *ctx)
{
	return revnat4(ctx);
}

SEC("cgroup/getpeername4")
int socklb_getpeername4(struct bpf_sock_addr *ctx)
{
	return revnat4(ctx);
}
