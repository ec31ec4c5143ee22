// SPDX-License-Identifier: GPL-2.0-only
/* Socket termination: when a backend leaves, sockets still connected to it
 * would keep talking to a pod that is gone (a DNS client's connected UDP
 * socket, forever). These iterators walk a network namespace's sockets and
 * destroy those whose peer is in sock_targets, so the application sees an
 * error (ECONNABORTED) and reconnects through the hooks to a live backend.
 * Only sockets socklb itself translated to that backend are touched (their
 * sock_conns entry or socket storage, sk_state, names it), so a socket that reached the pod IP directly, or
 * through another proxy, is left alone. Unconnected UDP sockets have no
 * peer and are never touched.
 * GPL-only: bpf_sock_destroy is a GPL kfunc. */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

#include "addr.h"
#include "kernel_types.h"
#include "maps.h"

char __license[] SEC("license") = "GPL";

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

struct sock_target {
	__u8 addr[16]; /* IPv4 as v4-mapped, like the service maps */
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	/* One walk's targets are backends retired by one Apply, at most every
	 * backend: sized like backends, so writing them never fails. */
	__uint(max_entries, SOCKLB_MAX_BACKENDS);
	__type(key, struct sock_target);
	__type(value, __u8);
} sock_targets SEC(".maps");

/* How many sockets the last walks destroyed: [0] TCP, [1] UDP. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sock_destroyed SEC(".maps");

/* translated_to reports whether socklb sent this socket to t: its
 * sock_conns entry (a TCP socket) or its socket storage names t as a
 * backend. */
static __always_inline int translated_to(struct sock_common *sk, const struct sock_target *t)
{
	struct sock_state *st;

	if (t->proto == IPPROTO_TCP) {
		__u64 cookie = bpf_get_socket_cookie(sk);
		struct sock_entry *e = bpf_map_lookup_elem(&sock_conns, &cookie);

		if (e && e->backend_port == t->port && addr_eq(e->backend, t->addr))
			return 1;
	}
	st = bpf_sk_storage_get(&sk_state, sk, 0, 0);
	if (!st)
		return 0;
#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++) {
		if (st->e[i].affinity_id && st->e[i].backend_port == t->port &&
		    addr_eq(st->e[i].backend, t->addr))
			return 1;
	}
	return 0;
}

static __always_inline int is_target(struct sock_common *sk, __u8 proto)
{
	struct sock_target t = {};
	__u32 *w = (__u32 *)t.addr;
	unsigned short family = sk->skc_family;

	if (family == AF_INET) {
		addr_from_v4(t.addr, sk->skc_daddr);
	} else if (family == AF_INET6) {
		w[0] = sk->skc_v6_daddr.s6_addr32[0];
		w[1] = sk->skc_v6_daddr.s6_addr32[1];
		w[2] = sk->skc_v6_daddr.s6_addr32[2];
		w[3] = sk->skc_v6_daddr.s6_addr32[3];
	} else {
		return 0;
	}
	t.port = sk->skc_dport;
	t.proto = proto;
	if (!bpf_map_lookup_elem(&sock_targets, &t))
		return 0;

	return translated_to(sk, &t);
}

static __always_inline void count(__u32 idx)
{
	__u64 *n = bpf_map_lookup_elem(&sock_destroyed, &idx);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("iter/tcp")
int socklb_destroy_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *sk = ctx->sk_common;
	unsigned char state;

	if (!sk)
		return 0;
	state = sk->skc_state;
	if (state == TCP_LISTEN || state == TCP_CLOSE)
		return 0;
	if (is_target(sk, IPPROTO_TCP) && bpf_sock_destroy(sk) == 0)
		count(0);
	return 0;
}

SEC("iter/udp")
int socklb_destroy_udp(struct bpf_iter__udp *ctx)
{
	struct sock_common *sk = (struct sock_common *)ctx->udp_sk;

	if (!sk)
		return 0;
	/* Only connected sockets have a peer; a DNS resolver's unconnected
	 * socket serves many destinations and must survive. */
	if (sk->skc_state != TCP_ESTABLISHED)
		return 0;
	if (is_target(sk, IPPROTO_UDP) && bpf_sock_destroy(sk) == 0)
		count(1);
	return 0;
}
