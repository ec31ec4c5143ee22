//go:build node

package node_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// agentCaps are the capabilities the DaemonSet gives the agent
// (deploy/base/daemonset.yaml, the chart's securityContext).
var agentCaps = []int{unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE}

// TestAgentRunsUnprivileged: on every node the agent's process, as the
// kernel sees it, holds exactly the DaemonSet's capabilities (effective
// and bounding: no privileged container), runs under a seccomp filter
// (RuntimeDefault) and has a read-only root. The other real-node tests and
// the upstream suite run against these same agents, so they show what
// socklb does with no more than that.
func TestAgentRunsUnprivileged(t *testing.T) {
	needSocklb(t)
	var want uint64
	for _, c := range agentCaps {
		want |= 1 << c
	}
	for i := range n.Nodes {
		name := nodeName(t, i)
		pod := agentPod(t, name)
		pid, err := agentPID(string(pod.UID))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		bad := false
		errorf := func(format string, args ...any) { bad = true; t.Errorf(format, args...) }
		for _, field := range []string{"CapEff", "CapBnd"} {
			got, err := statusHex(status, field)
			if err != nil || got != want {
				errorf("%s: agent (pid %d) %s %#x, want %#x (the DaemonSet's capabilities): %v", name, pid, field, got, want, err)
			}
		}
		seccomp := statusField(status, "Seccomp")
		if seccomp != "2" {
			errorf("%s: agent (pid %d) Seccomp %q, want 2 (a filter: RuntimeDefault)", name, pid, seccomp)
		}
		mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			t.Fatal(err)
		}
		opts := rootMountOptions(mounts)
		if !strings.Contains(","+opts+",", ",ro,") {
			errorf("%s: agent (pid %d) root mounted %q, want ro (readOnlyRootFilesystem)", name, pid, opts)
		}
		if !bad {
			eff, _ := statusHex(status, "CapEff")
			t.Logf("%s: agent pid %d: CapEff %#x, Seccomp %s, root mounted %s", name, pid, eff, seccomp, opts)
		}
	}
}

// agentPID finds the agent's process of the pod with this UID: kubelet
// names a pod's cgroup after its UID (dashes or underscores, by driver).
func agentPID(uid string) (int, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(cmd, []byte("/socklb\x00agent\x00")) {
			continue
		}
		dir := filepath.Dir(p)
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue
		}
		if bytes.Contains(cg, []byte(uid)) || bytes.Contains(cg, []byte(strings.ReplaceAll(uid, "-", "_"))) {
			return strconv.Atoi(filepath.Base(dir))
		}
	}
	return 0, fmt.Errorf("no /socklb agent process in a cgroup of pod %s", uid)
}

func statusField(status []byte, name string) string {
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func statusHex(status []byte, name string) (uint64, error) {
	return strconv.ParseUint(statusField(status, name), 16, 64)
}

// rootMountOptions is the per-mount options (field 6) of the mount at "/"
// in a mountinfo: the last one, which hides any below it.
func rootMountOptions(mountinfo []byte) string {
	opts := ""
	for _, l := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			opts = f[5]
		}
	}
	return opts
}
