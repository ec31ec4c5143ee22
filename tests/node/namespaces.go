package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The parent tells the child which cgroup is its own through these.
const (
	insideEnv = "SOCKLB_NODE_INSIDE"
	cgroupEnv = "SOCKLB_NODE_CGROUP"
)

// Inside reports whether this process runs in the namespaces Enter made.
func Inside() bool { return os.Getenv(insideEnv) == "1" }

// CgroupName is the run's cgroup name, in the child.
func CgroupName() string { return os.Getenv(cgroupEnv) }

// Enter runs this same binary again, with the same arguments, in a new
// mount and network namespace and in a fresh child cgroup of every
// hierarchy, and returns its exit code. Whatever happens to the child, the
// parent then kills every process left in that cgroup, removes it, and
// checks that nothing is attached to the cgroup v2 root. The namespaces
// die with their last process.
func Enter() (int, error) {
	name := fmt.Sprintf("sl-node-%d", os.Getpid())
	before, err := topCgroups()
	if err != nil {
		return 1, err
	}
	cg, err := NewCgroups(name)
	if err != nil {
		return 1, err
	}
	var made []string // mount points the child creates on the machine's disk
	for _, d := range privateDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			made = append(made, d)
		}
	}
	defer func() {
		for _, d := range made {
			_ = syscall.Rmdir(d)
		}
		// A container asked for without a cgroupsPath under cgroupRoot
		// lands at the top of every hierarchy, under the runtime's own
		// names: those that appeared during the run are the run's. (Other
		// new names belong to whoever else uses this machine.)
		if after, err := topCgroups(); err == nil {
			for d := range after {
				if !before[d] && runtimeCgroupNames[filepath.Base(d)] {
					fmt.Fprintf(os.Stderr, "node: removing cgroup %s, made during the run outside its cgroup\n", d)
					stray := &Cgroups{Name: filepath.Base(d), Dirs: []string{d}}
					_ = stray.KillAll(10 * time.Second)
					_ = stray.Remove()
				}
			}
		}
		if err := cg.KillAll(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
		}
		if err := cg.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
		}
		if err := RootCgroupClean(); err != nil {
			fmt.Fprintln(os.Stderr, "node: DANGER:", err)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), insideEnv+"=1", cgroupEnv+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("starting the node harness in new namespaces: %w", err)
	}
	// The child joins the cgroup itself (Setup), before it starts anything.
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// privateDirs get a tmpfs of the run's own: containerd's pod netns files,
// runc's root, CNI's IPAM state, the DaemonSet's cgroup2 mount point and
// kubelet's log symlinks live at fixed paths.
var privateDirs = []string{"/run/netns", "/run/containerd", "/var/lib/cni", "/run/socklb", "/var/log/containers"}

// runtimeCgroupNames are the top-level cgroups containerd and kubelet make
// when not told otherwise.
var runtimeCgroupNames = map[string]bool{"k8s.io": true, "default": true, "kubepods": true, "kubepods.slice": true}

// topCgroups lists the directories at the top of every hierarchy.
func topCgroups() (map[string]bool, error) {
	all, _, err := hierarchies()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, h := range all {
		es, err := os.ReadDir(h)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.IsDir() {
				out[filepath.Join(h, e.Name())] = true
			}
		}
	}
	return out, nil
}

// Setup prepares the namespaces in the child: mounts private (nothing
// propagates back to the machine), a fresh bpffs at /sys/fs/bpf, tmpfs
// where the runtime keeps state at fixed paths, and the loopback up. It
// joins the run's cgroup.
func Setup() (*Cgroups, error) {
	if !Inside() {
		return nil, fmt.Errorf("node.Setup outside the node's namespaces")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making mounts private: %w", err)
	}
	// A bpffs instance of our own: socklb's pins (and the links they hold)
	// are freed with this namespace, and the machine's pins are out of
	// reach.
	if err := syscall.Mount("bpffs", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
		return nil, fmt.Errorf("mounting a private bpffs: %w", err)
	}
	// containerd, runc, CNI and kubelet keep state at fixed paths: keep
	// it here.
	for _, d := range privateDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return nil, fmt.Errorf("mounting tmpfs on %s: %w", d, err)
		}
	}
	// Shared again, but now in peer groups of this namespace only: the
	// DaemonSet's Bidirectional volumes (the cgroup2 mount its init
	// container makes) need shared mounts, and none reaches the machine.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
		return nil, fmt.Errorf("making the namespace's mounts shared: %w", err)
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	// Bridged pod traffic goes through iptables (kube-proxy control run),
	// and the node routes between its pods.
	for k, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                 "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables":  "1",
		"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile(k, []byte(v), 0o644); err != nil {
			return nil, fmt.Errorf("setting %s in the node's netns: %w", k, err)
		}
	}
	name := CgroupName()
	all, v2, err := hierarchies()
	if err != nil {
		return nil, err
	}
	cg := &Cgroups{Name: name, V2: filepath.Join(v2, name)}
	for _, h := range all {
		cg.Dirs = append(cg.Dirs, filepath.Join(h, name))
	}
	if err := cg.Join(); err != nil {
		return nil, fmt.Errorf("joining cgroup %s: %w", cg.V2, err)
	}
	return cg, nil
}

// RootCgroupClean checks that no BPF program is attached to the root of the
// cgroup v2 tree: the one thing this harness must never do.
func RootCgroupClean() error {
	_, v2, err := hierarchies()
	if err != nil {
		return err
	}
	out, err := exec.Command("bpftool", "cgroup", "show", v2).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bpftool cgroup show %s: %v: %s", v2, err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("BPF programs are attached to the root cgroup %s:\n%s", v2, s)
	}
	return nil
}
