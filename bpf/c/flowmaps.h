/* The per-packet path's state: what conntrack and its NAT table hold for
 * kube-proxy. A packet from another machine to a NodePort, LoadBalancer IP
 * or externalIP starts a flow; its backend is chosen once and kept for the
 * flow's life, and the flow's replies are found by their own 5-tuple and
 * translated back. Pinned with the other maps, so an agent restart or
 * upgrade loses no established flow.
 */
#ifndef SOCKLB_FLOWMAPS_H
#define SOCKLB_FLOWMAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* flow_value.dir */
enum flow_dir : __u8 {
	FLOW_ORIG = 0,	/* client -> frontend, as it reaches the node */
	FLOW_REPLY = 1, /* backend -> client (or -> the node, when SNATed), a reply */
};

/* One direction of a flow, as its packets carry it. The two directions of
 * all flows share one key space, so a packet costs one lookup whichever it
 * is: their tuples differ (a reply comes from a backend, to a SNAT port
 * outside the NodePort range or to the client), and an insert that would
 * collide is refused (BPF_NOEXIST) rather than overwriting. */
struct flow_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* flow_value.flags */
enum flow_flag : __u8 {
	FLOW_F_SNAT = 0x1,    /* the client's address was replaced by the node's */
	FLOW_F_REPLIED = 0x2, /* a reply was seen: the flow is established */
	FLOW_F_CLOSING = 0x4, /* a TCP FIN or RST was seen */
};

/* What a packet of the entry's direction is rewritten to.
 * FLOW_ORIG:  dst -> addr:port (the backend); src -> nat_addr:nat_port
 *             when FLOW_F_SNAT (the node's address and a port of its own).
 * FLOW_REPLY: src -> nat_addr:nat_port (the frontend); dst -> addr:port
 *             (the client) when the flow is SNATed.
 * Only the ORIG entry's times and flags count: a reply refreshes it, and
 * the agent removes both entries when it expires. */
struct flow_value {
	__u8 addr[16];
	__u8 nat_addr[16];
	__be16 port;
	__be16 nat_port;
	__u32 backend_id; /* the backend's counters, in stats */
	__u32 svc_id;	  /* the frontend chosen from: is the backend still one of its members? */
	__u32 ifindex;	  /* the device the client's packets came in on */
	__u64 created;	  /* bpf_ktime_get_ns() */
	__u64 last_seen;
	enum flow_dir dir;
	enum flow_flag flags;
	__u8 pad[6];
};

/* Two entries a flow. A hash without preallocation, as conntrack: when it
 * is full a new flow is dropped (counted in flow_events) and no live flow is
 * ever evicted for it; the agent removes expired flows. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 2 * SOCKLB_MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} flows SEC(".maps");

/* The addresses a device SNATs to: the node's own address on it, per
 * family (IPv4 v4-mapped). Written by the agent when it attaches. */
struct nat_dev {
	__u8 addr4[16];
	__u8 addr6[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* ifindex */
	__type(value, struct nat_dev);
} nat_devs SEC(".maps");

/* flow_events counters, per CPU: why packets were not served. */
enum flow_event : __u32 {
	FLOW_EV_NEW = 0,	   /* flows created */
	FLOW_EV_FULL = 1,	   /* flows map full: new flow dropped */
	FLOW_EV_NO_PORT = 2,	   /* no free SNAT port toward the backend */
	FLOW_EV_NO_ENDPOINT = 3,   /* a Service without endpoints: dropped */
	FLOW_EV_POLICY_DROP = 4,   /* externalTrafficPolicy Local, no local endpoint */
	FLOW_EV_SRC_RANGE = 5,	   /* a source outside loadBalancerSourceRanges */
	FLOW_EV_NO_ROUTE = 6,	   /* no route to the backend or back to the client */
	FLOW_EV_MAX = 7,
};

/* Puts enum flow_event in the object's BTF, for bpf2go's Go constants. */
volatile const enum flow_event flow_event_count = FLOW_EV_MAX;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOW_EV_MAX);
	__type(key, __u32); /* enum flow_event: an array's key must be a plain u32 */
	__type(value, __u64);
} flow_events SEC(".maps");

#endif
