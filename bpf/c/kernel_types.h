/* The few kernel types the socket iterators read, declared by hand with
 * preserve_access_index: the loader relocates every field access against
 * the running kernel's BTF, so no vmlinux.h is needed and layouts may
 * differ between kernels. */
#ifndef SOCKLB_KERNEL_TYPES_H
#define SOCKLB_KERNEL_TYPES_H

#include <linux/types.h>

#define CORE __attribute__((preserve_access_index))

/* Address families (include/linux/socket.h): macros, so not in the
 * kernel's BTF; their values are ABI. */
#define AF_INET 2
#define AF_INET6 10

/* skc_state values, as vmlinux.h has them (include/net/tcp_states.h);
 * UDP sockets use TCP_ESTABLISHED for connected. */
enum {
	TCP_ESTABLISHED = 1,
	TCP_CLOSE = 7,
	TCP_LISTEN = 10,
};

struct in6_addr___sl {
	__u32 s6_addr32[4];
};

struct atomic64___sl {
	__s64 counter;
};

struct sock_common {
	/* 0 until something asks for the socket's cookie. */
	struct atomic64___sl skc_cookie;
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr___sl skc_v6_daddr;
} CORE;

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
} CORE;

struct tcp_sock;

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
} CORE;

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} CORE;

struct udp_sock;

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
	__u32 uid;
	int bucket;
} CORE;

/* What the task iterator reads of a process: its network namespace's
 * inode number, the one /proc/PID/ns/net stats as. */
struct ns_common {
	unsigned int inum;
} CORE;

struct net {
	struct ns_common ns;
} CORE;

struct nsproxy {
	struct net *net_ns;
} CORE;

struct task_struct {
	int pid;
	int tgid;
	struct nsproxy *nsproxy;
} CORE;

/* Only passed to and from kfuncs, which the loader checks against the
 * kernel's types: a forward declaration would not match. */
struct cgroup {
	int level;
} CORE;

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} CORE;

#endif
