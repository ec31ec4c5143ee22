/* Carrying live sockets' state (sk_state) into the maps of a new layout.
 * Socket-local storage has no map syscalls by socket, so a migration that
 * makes a new sk_state map would leave every socket open across it without
 * its frontend: getpeername() and UDP replies would show the pod, socket
 * termination would no longer find it. These iterators walk a network
 * namespace's TCP and UDP sockets (as sockterm.c does) and copy each
 * socket's entries from the old map, sk_state_from, into the new one,
 * sk_state; the agent hands both in when it loads this object.
 *
 * Walking the old map itself (SEC("iter/bpf_sk_storage_map")) would also
 * reach sockets outside the cgroup's namespaces, but the kernel here
 * refuses to load any map-element iterator (EPERM, docs/upgrade-maps.md).
 *
 * The old map holds the layout the agent before this one wrote. It is read
 * as struct sock_state_from, the one earlier layout this binary converts
 * from; the agent runs the walk only when the old map's BTF has exactly that
 * shape (pkg/datapath/skcarry.go), and otherwise starts the new map empty.
 * Changing struct sock_state in maps.h: leave sock_state_from as it is (it
 * is then the released layout the new one comes from) and fix
 * sk_carry_entry where it no longer compiles; after that release,
 * sock_state_from may follow.
 *
 * An iterator may create socket storage: bpf_sk_storage_get is allowed in
 * BPF_TRACE_ITER programs (net/core/bpf_sk_storage.c,
 * bpf_sk_storage_tracing_allowed). */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

#include "addr.h"
#include "kernel_types.h"
#include "maps.h"

char __license[] SEC("license") = "GPL";

struct sock_entry_from {
	__u8 backend[16];
	__u8 frontend[16];
	__be16 backend_port;
	__be16 frontend_port;
	__u32 affinity_id;
};

struct sock_state_from {
	struct sock_entry_from e[4];
	__u32 next;
	__u32 src_check; /* pad before source ranges: 0 */
};

/* The old generation's sk_state, replaced at load by the pinned map. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_state_from);
} sk_state_from SEC(".maps");

/* [0] sockets whose entries were carried, [1] sockets that got no storage
 * in the new map (memory). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sk_carried SEC(".maps");

static __always_inline void sk_carry_count(__u32 idx)
{
	__u64 *n = bpf_map_lookup_elem(&sk_carried, &idx);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* The id of a carried entry whose frontend the new maps lack. The agent
 * hands out ids from 1 to twice --max-services (pkg/datapath/ids.go), so
 * no Service port has it. */
#define SK_CARRY_GONE 0xffffffffu

/* sk_carry_entry converts one entry. Its Service port is an affinity_id,
 * which a refill of the Service maps hands out again, maybe to another
 * port: the frontend's entry in the new services map (filled before the
 * first walk) gives the id now. A frontend no longer there gets
 * SK_CARRY_GONE: the entry still serves replies, getpeername and socket
 * termination (any id but 0), but keeping the old id, should the refill
 * have given it to another port the socket also sends to, would put this
 * entry before that port's own in lb_sock_find: the socket would leave
 * the backend it keeps for that port. */
static __always_inline void sk_carry_entry(struct sock_entry *to, const struct sock_entry_from *from, __u8 proto)
{
	struct svc_key key = {};
	struct svc_value *sv;

	__builtin_memcpy(to->backend, from->backend, sizeof(to->backend));
	__builtin_memcpy(to->frontend, from->frontend, sizeof(to->frontend));
	to->backend_port = from->backend_port;
	to->frontend_port = from->frontend_port;
	to->affinity_id = SK_CARRY_GONE;
	__builtin_memcpy(key.addr, from->frontend, sizeof(key.addr));
	/* Looked up as the hooks look it up (lb_local_key): a localhost
	 * NodePort is programmed as 127.0.0.1 whichever 127/8 address the
	 * socket sent to. */
	if (addr_is_v4(key.addr) && (bpf_ntohl(addr_to_v4(key.addr)) >> 24) == 127)
		addr_from_v4(key.addr, bpf_htonl(0x7f000001));
	key.port = from->frontend_port;
	key.proto = proto;
	sv = bpf_map_lookup_elem(&services, &key);
	if (sv) {
		__u32 id = sv->affinity_id;

		if (id)
			to->affinity_id = id;
	}
}

static __always_inline int sk_has_entry(const struct sock_state *st, const struct sock_entry_from *from)
{
#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++) {
		if (st->e[i].affinity_id && st->e[i].backend_port == from->backend_port &&
		    st->e[i].frontend_port == from->frontend_port && addr_eq(st->e[i].backend, from->backend) &&
		    addr_eq(st->e[i].frontend, from->frontend))
			return 1;
	}
	return 0;
}

/* The agent runs this walk twice: just before the links switch to the new
 * programs (after the first sync when the Service maps are refilled), and
 * again right after, for what the old programs wrote in between. By the second walk the new programs may have written a
 * socket's new state themselves, and what they wrote is newer: an old
 * entry only fills a free slot, and one already there is not repeated. */
static __always_inline int sk_carry(struct sock_common *sk, __u8 proto)
{
	const struct sock_state_from *old;
	struct sock_state *st;
	int used = 0;

	if (!sk)
		return 0;
	old = bpf_sk_storage_get(&sk_state_from, sk, 0, 0);
	if (!old)
		return 0;
	st = bpf_sk_storage_get(&sk_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		sk_carry_count(1);
		return 0;
	}
#pragma unroll
	for (int i = 0; i < SOCK_ENTRIES; i++)
		used += st->e[i].affinity_id != 0;
	if (!used)
		st->next = old->next;
	if (old->src_check)
		st->src_check = 1;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (!old->e[i].affinity_id || sk_has_entry(st, &old->e[i]))
			continue;
#pragma unroll
		for (int j = 0; j < SOCK_ENTRIES; j++) {
			if (!st->e[j].affinity_id) {
				sk_carry_entry(&st->e[j], &old->e[i], proto);
				break;
			}
		}
	}
	sk_carry_count(0);
	return 0;
}

SEC("iter/tcp")
int socklb_carry_tcp(struct bpf_iter__tcp *ctx)
{
	return sk_carry(ctx->sk_common, IPPROTO_TCP);
}

SEC("iter/udp")
int socklb_carry_udp(struct bpf_iter__udp *ctx)
{
	return sk_carry((struct sock_common *)ctx->udp_sk, IPPROTO_UDP);
}
