/* Per-CPU scratch space for what does not fit on the per-packet path's
 * stack beside its callers' frames (the verifier allows 512 bytes for a
 * whole call chain): a flow's two new entries, a frame being built. A
 * program runs to completion on its CPU, so one slot per CPU is enough.
 */
#ifndef SOCKLB_SCRATCH_H
#define SOCKLB_SCRATCH_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "flowmaps.h"

#define SCRATCH_FRAME 128

struct scratch_space {
	struct flow_value orig;
	struct flow_value reply;
	__u8 frame[SCRATCH_FRAME];
	__u8 pseudo[40]; /* an IPv6 pseudo-header, for ICMPv6 checksums */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch_space);
} scratch SEC(".maps");

#endif
