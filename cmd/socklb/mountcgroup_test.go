package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// TestMountCgroupInTheNodesMountNamespace: the init container's way of
// mounting without privileged. A process in a mount namespace of its own
// stands for the node; `socklb mount-cgroup --mount-ns` mounts cgroup2
// and bpffs in that namespace, where they show, and not in the caller's;
// run again it finds them and mounts nothing; `socklb cleanup
// --unmount-cgroup` unmounts the cgroup2 there and removes its directory,
// leaving bpffs, which the node's other BPF users share.
func TestMountCgroupInTheNodesMountNamespace(t *testing.T) {
	testkit.RequireRoot(t, "creates a mount namespace and mounts in it")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("needs util-linux's unshare: %v", err)
	}
	dir := t.TempDir()
	node := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "300")
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	// Killing the only process of the namespace frees its mounts.
	defer func() { node.Process.Kill(); node.Wait() }()
	mntNS := "/proc/" + strconv.Itoa(node.Process.Pid) + "/ns/mnt"
	self, _ := os.Readlink("/proc/self/ns/mnt")
	waitFor(t, "unshare's own mount namespace", func() bool {
		ns, _ := os.Readlink(mntNS)
		return ns != "" && ns != self
	})
	cg, bpf := filepath.Join(dir, "cgroupv2"), filepath.Join(dir, "bpf")
	mounted := func(path string) (inNode, here bool) {
		nodeInfo, _ := os.ReadFile("/proc/" + strconv.Itoa(node.Process.Pid) + "/mountinfo")
		selfInfo, _ := os.ReadFile("/proc/self/mountinfo")
		return strings.Contains(string(nodeInfo), " "+path+" "), strings.Contains(string(selfInfo), " "+path+" ")
	}

	args := []string{"mount-cgroup", "--mount-ns", mntNS, "--cgroup-ns", "/proc/self/ns/cgroup", "--bpffs", bpf, cg}
	code, out, errOut := runMain(t, args...)
	if code != 0 {
		t.Fatalf("socklb %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	for _, p := range []string{cg, bpf} {
		if inNode, here := mounted(p); !inNode || here {
			t.Errorf("%s: mounted in the node's namespace %v, in the caller's %v; want only the node's\n%s", p, inNode, here, out)
		}
	}
	if code, out, _ = runMain(t, args...); code != 0 || !strings.Contains(out, "cgroup2 already mounted at "+cg) || !strings.Contains(out, "bpf already mounted at "+bpf) {
		t.Errorf("run again: exit %d, want both found mounted:\n%s", code, out)
	}

	cleanup := []string{"cleanup", "--bpffs-path", filepath.Join(dir, "none"), "--unmount-cgroup", cg, "--mount-ns", mntNS}
	if code, out, errOut = runMain(t, cleanup...); code != 0 || !strings.Contains(out, "unmounted the cgroup2 at "+cg) {
		t.Fatalf("socklb %s: exit %d\n%s%s", strings.Join(cleanup, " "), code, out, errOut)
	}
	if inNode, _ := mounted(cg); inNode {
		t.Errorf("%s still mounted in the node's namespace after cleanup", cg)
	}
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("%s still there after cleanup: %v", cg, err)
	}
	if inNode, _ := mounted(bpf); !inNode {
		t.Errorf("cleanup unmounted bpffs at %s, which the node's other BPF users share", bpf)
	}
}

// TestMountCgroupNeedsAParent: without hostPID a container's process has
// no visible parent, and the error says what to fix.
func TestMountCgroupNeedsAParent(t *testing.T) {
	ns := hostNamespaces{mount: "/nonexistent/ns/mnt", cgroup: "/proc/self/ns/cgroup"}
	if err := ns.enter(); err == nil || !strings.Contains(err.Error(), "hostPID and CAP_SYS_PTRACE") {
		t.Errorf("a mount namespace that cannot be opened: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
