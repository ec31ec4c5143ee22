/* Map layout: the three links of kube-proxy's iptables chain, plus the state
 * a socket-level LB needs where iptables has conntrack. Keys and values are
 * named structs so BTF lets `bpftool map dump` print fields, and bpf2go emits
 * matching Go types. Addresses are 16 bytes: IPv4 is stored IPv4-mapped
 * (::ffff:a.b.c.d) so one key type serves both families and a v4-mapped
 * IPv6 socket finds an IPv4 service with no second lookup. Ports are in
 * network byte order, as the kernel hands them to sock_addr programs.
 */
#ifndef SOCKLB_MAPS_H
#define SOCKLB_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The agent sets every max_entries at load time (mapTable in
 * pkg/datapath/maps.go). These equal its defaults (pkg/datapath/config.go,
 * kept equal by TestMapTable), so either file tells the real capacity. */
#define SOCKLB_MAX_SERVICES 262144
#define SOCKLB_MAX_BACKENDS 2097152
#define SOCKLB_MAX_AFFINITY 65536
#define SOCKLB_MAX_FLOWS 262144
#define SOCKLB_MAX_SOCKETS 262144

/* svc_key.scope: who a frontend serves. Cilium's two lookup scopes: a
 * Service with externalTrafficPolicy Local answers packets from other
 * machines with this node's endpoints only (SVC_SCOPE_EXTERNAL), while
 * sockets on the node keep every endpoint (SVC_SCOPE_ANY), kube-proxy's
 * short-circuit for traffic that starts on the node. */
enum svc_scope : __u8 {
	SVC_SCOPE_ANY = 0,	/* sockets on the node; packets too, unless an EXTERNAL entry exists */
	SVC_SCOPE_EXTERNAL = 1, /* packets from other machines only */
};

/* KUBE-SERVICES: which frontends exist. A NodePort is one frontend at
 * the unspecified address of its family (::ffff:0.0.0.0 or ::), found
 * once node_addrs says the destination is one of this node's NodePort
 * addresses, or another node's: one entry per port, not one per node
 * address. */
struct svc_key {
	__u8 addr[16];
	__be16 port;
	__u8 proto; /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP */
	enum svc_scope scope;
};

/* Enums with a fixed underlying type (a clang extension in C) keep the
 * fields' sizes and put the names in BTF, from which bpf2go emits the Go
 * constants: the C definition is the only one. */

/* svc_value.flags, a bit set. */
enum svc_flag : __u16 {
	SVC_F_POLICY_DROP = 0x1, /* endpoints exist, the traffic policy allows none here */
	SVC_F_LOCAL = 0x2,	 /* internalTrafficPolicy Local (informational) */
	SVC_F_SRC_RANGES = 0x4,	 /* loadBalancerSourceRanges: src_ranges lists who may connect */
	SVC_F_LOCAL_NODE_ONLY = 0x8, /* a NodePort served at this node's addresses, not others' (externalTrafficPolicy Local) */
};

/* svc_value.kind: why the frontend exists. */
enum svc_kind : __u8 {
	SVC_KIND_CLUSTER_IP = 0,
	SVC_KIND_NODE_PORT = 1,
	SVC_KIND_EXTERNAL_IP = 2,
	SVC_KIND_LOAD_BALANCER = 3,
};

struct svc_value {
	__u32 svc_id;
	__u32 count;	  /* backends in this generation's slots; 0 = REJECT */
	__u32 generation; /* which slots are live; flipped by one map write */
	__u32 affinity_timeout; /* seconds; 0 = no sessionAffinity */
	enum svc_flag flags; /* SVC_F_* or'ed */
	enum svc_kind kind;
	__u8 pad;
	/* Shared by every frontend of one Service port (and family): kube-
	 * proxy's `recent` lists live in the endpoint chains, so a client keeps
	 * its pod whether it comes through the ClusterIP, a NodePort, an
	 * externalIP or a LoadBalancer IP. */
	__u32 affinity_id;
};

/* KUBE-SVC-*: the slot -> backend table a random draw indexes. Keyed by
 * generation so a new backend set is written beside the live one. */
struct slot_key {
	__u32 svc_id;
	__u32 generation;
	__u32 slot;
};

/* A slot echoes its own key's service id and generation: an element a
 * writer deleted can hold another key's value by the time a reader copies it
 * (see "Recycled elements" below), and the echo is how the reader notices. */
struct slot_value {
	__u32 backend_id;
	__u32 svc_id;
	__u32 generation;
};

/* KUBE-SEP-*: where a backend lives. One entry per endpoint of a Service
 * port, shared by the port's frontends, as their KUBE-SVC chains share the
 * KUBE-SEP chains (pkg/datapath/backends.go). */
struct backend {
	__u8 addr[16];
	__be16 port;
	__u8 proto;
	__u8 flags;
	__u32 id; /* its own key, echoed, for the same reason as slot_value's */
};

/* Per-socket state: what replies and getpeername need to show the
 * frontend (conntrack's reply NAT), which the socket iterators use to find a
 * backend's sockets, and the backend an unconnected UDP socket keeps.
 *
 * A connected TCP socket has one peer for life, so its one entry lives in
 * sock_conns, a preallocated LRU keyed by socket cookie, as Cilium's
 * cilium_lb4_reverse_sk: writing it takes no allocation, where creating
 * socket-local storage (two allocations, two locks, a memory charge and an
 * RCU free at close) was two thirds of connect4's cost. The sock_release
 * hook deletes the entry when the socket closes, so the LRU evicts only
 * when more translated TCP sockets are open at once than it holds
 * (--max-sockets); an evicted socket keeps its connection, and getpeername
 * then shows the pod, as it would for a socket opened before socklb.
 * Cookies are never reused while the machine runs, so an entry can never
 * name another socket.
 *
 * Every other translated socket keeps its state in socket-local storage,
 * freed with the socket: UDP sockets (an unconnected one may send to
 * several Service ports, and replies are rewritten per datagram), and TCP
 * sockets sent through a frontend with loadBalancerSourceRanges, whose
 * packets the egress hook checks by that storage (srccheck.h). One entry
 * per Service port the socket sent to, at most SOCK_ENTRIES (a power of
 * two); a socket using more overwrites its oldest entry (counted in
 * sock_events). */
#define SOCK_ENTRIES 4

struct sock_entry {
	__u8 backend[16];  /* where the socket was sent */
	__u8 frontend[16]; /* the address the application asked for */
	__be16 backend_port;
	__be16 frontend_port;
	__u32 affinity_id; /* svc_value.affinity_id: the Service port; 0 = unused */
};

struct sock_state {
	struct sock_entry e[SOCK_ENTRIES];
	__u32 next; /* the entry a new Service port takes */
	/* Nonzero once an entry was made through a frontend with
	 * loadBalancerSourceRanges: socklb_egress then checks this socket's
	 * packets (srccheck.h). Every other socket pays one lookup of this. */
	__u32 src_check;
};

/* Which Service port a svc_id belongs to. Only the agent and `socklb inspect`
 * read it; it lives in a map so the names survive an agent restart and show
 * up in `bpftool map dump` next to the ids. */
struct svc_name {
	char name[128]; /* namespace/name:port */
};

/* affinity_key.by: what identifies the client. */
enum affinity_by : __u32 {
	AFFINITY_BY_NETNS = 0, /* a socket on the node: its netns cookie, in the first 8 bytes */
	AFFINITY_BY_ADDR = 1,  /* a packet from another machine: its source address */
};

/* sessionAffinity: ClientIP. At the socket layer the client is a network
 * namespace (a pod), identified by its netns cookie, as Cilium does: the
 * source IP is not chosen yet at connect() time. A packet from another
 * machine is its source address, as kube-proxy's `recent --rsource`. */
struct affinity_key {
	__u8 client[16];
	__u32 affinity_id; /* svc_value.affinity_id: the Service port */
	enum affinity_by by;
};

/* The endpoint, not a backend id: ids are per Service port and reused, so an
 * entry is honoured only while members says the endpoint is still one of
 * the Service's backends. */
struct affinity_value {
	__u64 last_used; /* bpf_ktime_get_ns() */
	__u8 addr[16];
	__be16 port;
	__u16 pad;
	__u32 pad2;
};

/* Which endpoints a frontend has now: the backend-to-service match Cilium
 * keeps (lb_affinity_match), so per-client and per-socket state naming an
 * endpoint can be checked against the Service before it is used. */
struct member_key {
	__u32 svc_id;
	__be16 port;
	__u16 pad;
	__u8 addr[16];
};

/* iptables -L -v pkts column, per KUBE-SEP: per endpoint of a Service port. */
struct backend_stats {
	__u64 connects;
	__u64 datagrams;
};

/* Recycled elements. BPF_F_NO_PREALLOC only saves memory: it does not make
 * a deleted or replaced element wait for an RCU grace period. Since Linux 6.1
 * hash maps allocate from bpf_mem_alloc, which hands a freed element to the
 * next update at once (the memory stays a valid map element, its contents
 * may be another key's). A hook therefore copies each value once to its
 * stack and checks the copy belongs to the key it looked up (slot_value's
 * and backend's echoes, the service entry read again) before using it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKLB_MAX_SERVICES);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	/* One per endpoint of each frontend, where backends has one per
	 * endpoint of a Service port: a port with a NodePort has two slot
	 * sets to one backend set. A switching frontend holds two
	 * generations for a moment. */
	__uint(max_entries, 2 * SOCKLB_MAX_BACKENDS);
	__type(key, struct slot_key);
	__type(value, struct slot_value);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKLB_MAX_BACKENDS);
	__type(key, __u32); /* backend id */
	__type(value, struct backend);
} backends SEC(".maps");

/* Indexed by backend id: ids run 1 .. 2 * max backends (a freed id rests
 * before it is reused: pkg/datapath/ids.go), so the array holds one more
 * than that. An array slot is found without a hash lookup (the verifier
 * inlines it), and one shared slot per backend, counted with atomic adds,
 * is 16 bytes whatever the number of CPUs, where a per-CPU hash took 16
 * per CPU (a gigabyte at a million backends on 64 CPUs). The agent zeroes
 * a slot when it hands its id to a new backend. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SOCKLB_MAX_BACKENDS + 1);
	__type(key, __u32); /* backend id */
	__type(value, struct backend_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKLB_MAX_SERVICES);
	__type(key, __u32); /* svc id */
	__type(value, struct svc_name);
} svc_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SOCKLB_MAX_AFFINITY);
	__type(key, struct affinity_key);
	__type(value, struct affinity_value);
} affinity SEC(".maps");

/* Members are per frontend, as slots are, for the frontends whose members
 * something reads: sized as slots. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 2 * SOCKLB_MAX_BACKENDS);
	__type(key, struct member_key);
	__type(value, __u32); /* backend id */
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_state);
} sk_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SOCKLB_MAX_SOCKETS);
	__type(key, __u64); /* socket cookie */
	__type(value, struct sock_entry);
} sock_conns SEC(".maps");

/* sock_events counters, per CPU. */
#define SOCK_EV_EVICTED 0 /* an entry of a socket's sock_state was overwritten */
#define SOCK_EV_NO_STATE 1 /* no socket storage or sock_conns entry could be had */
#define SOCK_EV_MAX 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SOCK_EV_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sock_events SEC(".maps");

/* node_addrs: addresses of the cluster's nodes that NodePorts answer on.
 * This node's own (NODE_ADDR_LOCAL: its interfaces and Node object
 * addresses through --nodeport-addresses) reach the NodePort frontends at
 * the unspecified address. So do the other nodes' (NODE_ADDR_REMOTE): a
 * socket dialling one at a NodePort is translated here, as Cilium does,
 * instead of crossing to that node, unless the NodePort is
 * SVC_F_LOCAL_NODE_ONLY. */
enum node_addr_flag : __u32 {
	NODE_ADDR_REMOTE = 0x1,
	NODE_ADDR_LOCAL = 0x2,
};

struct node_addr_key {
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct node_addr_key);
	__type(value, enum node_addr_flag);
} node_addrs SEC(".maps");

/* loadBalancerSourceRanges of the frontends flagged SVC_F_SRC_RANGES: an
 * entry {svc_id, prefix} admits that prefix (kube-proxy's KUBE-FW rules). */
struct src_range_key {
	__u32 prefixlen; /* 32 (svc_id) + the prefix's length over addr[16] */
	__u32 svc_id;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKLB_MAX_SERVICES);
	__type(key, struct src_range_key);
	__type(value, __u8);
} src_ranges SEC(".maps");

#include "flowmaps.h"

#endif
