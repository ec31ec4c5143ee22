// SPDX-License-Identifier: GPL-2.0-only
/* The network namespaces in use by the hooked cgroup's processes, for the
 * socket iterators, which see one namespace per walk (sockterm.c). Listing
 * them from /proc costs a stat per process (98 ms at 10 000 processes);
 * this walks the kernel's task list once instead and keeps one process per
 * namespace. GPL-only: the cgroup kfuncs are. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kernel_types.h"

char __license[] SEC("license") = "GPL";

extern struct cgroup *bpf_cgroup_from_id(__u64 cgid) __ksym;
extern void bpf_cgroup_release(struct cgroup *cgrp) __ksym;
extern long bpf_task_under_cgroup(struct task_struct *task, struct cgroup *ancestor) __ksym;

/* The hooked cgroup's id (its directory's inode number), set at load. */
volatile const __u64 hooked_cgroup = 0;

/* Network namespace inode -> the pid of one process living in it. Far
 * more than the pods of a node; a walk that finds it full says so in
 * netns_full, and the agent lists the namespaces from /proc instead. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} netns_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} netns_full SEC(".maps");

SEC("iter/task")
int socklb_list_netns(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct cgroup *cg;
	struct nsproxy *nsp;
	__u32 inum, pid, zero = 0;
	long under;

	/* Processes, as cgroup.procs lists them: /proc/PID/ns/net is the
	 * thread group leader's. */
	if (!task || task->pid != task->tgid)
		return 0;
	cg = bpf_cgroup_from_id(hooked_cgroup);
	if (!cg)
		return 0;
	under = bpf_task_under_cgroup(task, cg);
	bpf_cgroup_release(cg);
	if (!under)
		return 0;
	nsp = task->nsproxy;
	if (!nsp) /* exiting */
		return 0;
	inum = nsp->net_ns->ns.inum;
	pid = task->tgid;
	if (bpf_map_update_elem(&netns_pids, &inum, &pid, BPF_NOEXIST) == -7 /* E2BIG */) {
		__u32 *full = bpf_map_lookup_elem(&netns_full, &zero);

		if (full)
			*full = 1;
	}
	return 0;
}
