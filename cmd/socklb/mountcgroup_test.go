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
	needUnshare(t, "creates a mount namespace and mounts in it")
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

// TestMountCgroupDefaultsToTheParentsNamespace: what the init container
// does without --mount-ns. A shell in mount namespace A stands for the
// runtime's shim; socklb runs in B, a namespace of its own below A, as a
// container does. The mount shows in A, the parent's, and not in the
// caller's.
func TestMountCgroupDefaultsToTheParentsNamespace(t *testing.T) {
	needUnshare(t, "creates mount namespaces and mounts in them")
	cg := filepath.Join(t.TempDir(), "cgroupv2")
	// The shell waits for socklb, then prints its own namespace's mounts;
	// the namespaces die with it.
	script := `unshare --mount --propagation private "$0" -test.run='^$'; echo "exit $?"; echo ===; cat /proc/self/mountinfo`
	cmd := unshareMain("mount-cgroup --cgroup-ns /proc/self/ns/cgroup "+cg, "--mount", "--propagation", "private", "--fork", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	log, parentMounts, _ := strings.Cut(string(out), "===\n")
	if !strings.Contains(log, "mounted the host's cgroup2 at "+cg) || !strings.Contains(log, "exit 0") {
		t.Fatalf("socklb mount-cgroup in B:\n%s", log)
	}
	if !strings.Contains(parentMounts, " "+cg+" ") {
		t.Errorf("the cgroup2 at %s is not in the parent's mount namespace:\n%s", cg, log)
	}
	if self, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(self), " "+cg+" ") {
		t.Errorf("the cgroup2 at %s is in the caller's mount namespace", cg)
	}
}

// TestMountCgroupWithoutHostPID: a pod without hostPID gives its process
// no visible parent (getppid is 0 in a PID namespace's init), so there is
// no node's mount namespace to find; mount-cgroup says what to fix and
// mounts nothing. The PID namespace here stands for the pod's.
func TestMountCgroupWithoutHostPID(t *testing.T) {
	needUnshare(t, "creates a PID namespace")
	cg := filepath.Join(t.TempDir(), "cgroupv2")
	cmd := unshareMain("mount-cgroup "+cg, "--pid", "--fork")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no visible parent (does the pod have hostPID?)") {
		t.Errorf("mount-cgroup as a PID namespace's init: %v, want the hostPID error:\n%s", err, out)
	}
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("%s was made: %v", cg, err)
	}
}

func needUnshare(t *testing.T, why string) {
	t.Helper()
	testkit.RequireRoot(t, why)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("needs util-linux's unshare: %v", err)
	}
}

// unshareMain is `unshare flags... <this test binary>`, which runs as
// `socklb args` (TestMain): the binary is unshare's last argument, as the
// program to run or as a shell script's $0.
func unshareMain(args string, flags ...string) *exec.Cmd {
	cmd := exec.Command("unshare", append(flags, os.Args[0], "-test.run=^$")...)
	cmd.Env = append(os.Environ(), "SOCKLB_TEST_RUN_MAIN=1", "SOCKLB_TEST_ARGS="+args)
	return cmd
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
