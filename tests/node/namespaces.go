package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
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
// mount and network namespace (the harness's: the underlay, the control
// plane, e2e.test) and in a fresh child cgroup of every hierarchy, with a
// child of that per node (named after the node: kubelet's cgroupRoot, and
// where socklb attaches) and one for the harness itself, and returns its
// exit code. Whatever happens to the child, the parent then kills every
// process left in the run's cgroup, removes it, detaches any loop device
// still backed by a node's disk image under dir, and checks that nothing
// is attached to the cgroup v2 root. The namespaces die with their last
// process.
func Enter(dir string, nodes []NodeSpec) (int, error) {
	name := fmt.Sprintf("sl-run-%d", os.Getpid())
	before, err := topCgroups()
	if err != nil {
		return 1, err
	}
	cg, err := NewCgroups(name)
	if err != nil {
		return 1, err
	}
	for _, child := range append([]string{"harness"}, nodeNames(nodes)...) {
		if _, err := NewCgroups(name + "/" + child); err != nil {
			_ = cg.Remove()
			return 1, err
		}
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
		// would land at the top of every hierarchy, under the runtime's
		// own names. Such a cgroup is reported, never emptied: the
		// harness stops only what it can prove is its own (its pids, its
		// cgroup), and another user of this machine may make the same
		// names.
		if after, err := topCgroups(); err == nil {
			for d := range after {
				if !before[d] && runtimeCgroupNames[filepath.Base(d)] {
					fmt.Fprintf(os.Stderr, "node: WARNING: cgroup %s appeared during the run outside the run's cgroup; left alone (it may not be ours)\n", d)
				}
			}
		}
		if err := cg.KillAll(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
		}
		for _, s := range nodes {
			if err := DetachLoops(filepath.Join(dir, s.Name+".img")); err != nil {
				fmt.Fprintln(os.Stderr, "node:", err)
			}
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
	// An interrupt (^C to make) goes to the child, whose deferred stops
	// run; this process waits for it and then cleans up, whatever it did.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			fmt.Fprintf(os.Stderr, "node: %v: stopping the run (pid %d)\n", s, cmd.Process.Pid)
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
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

// runCgroupRe is the name Enter gives a run's cgroup: sl-run-<its pid>.
var runCgroupRe = regexp.MustCompile(`^sl-run-([0-9]+)$`)

// CleanStale removes what a run killed before its cleanup could run (its
// parent SIGKILLed) left: a top-level cgroup sl-run-<pid> whose pid is no
// longer this harness's (gone, or another program now), with every
// process in it, and loop devices still backed by a node disk of a
// socklb-node-* run directory in tmp. Only the harness makes such names.
func CleanStale(tmp string) error {
	all, _, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	stale := map[string]bool{}
	for _, h := range all {
		es, _ := os.ReadDir(h)
		for _, e := range es {
			m := runCgroupRe.FindStringSubmatch(e.Name())
			if m == nil || !e.IsDir() {
				continue
			}
			if exe, err := os.Readlink("/proc/" + m[1] + "/exe"); err == nil && strings.HasSuffix(exe, "node.test") {
				continue // a run in progress
			}
			stale[e.Name()] = true
		}
	}
	for name := range stale {
		fmt.Fprintf(os.Stderr, "node: removing the stale run cgroup %s (its harness is gone)\n", name)
		c := &Cgroups{Name: name}
		for _, h := range all {
			if _, err := os.Stat(filepath.Join(h, name)); err == nil {
				c.Dirs = append(c.Dirs, filepath.Join(h, name))
			}
		}
		if err := c.KillAll(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
		if err := c.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	imgs, _ := filepath.Glob(filepath.Join(tmp, "socklb-node-*", "sl-node-*.img"))
	for _, img := range imgs {
		if err := DetachLoops(img); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func nodeNames(nodes []NodeSpec) []string {
	var names []string
	for _, s := range nodes {
		names = append(names, s.Name)
	}
	return names
}

// Setup prepares the harness's namespaces in the child: mounts private
// (nothing propagates back to the machine), a fresh bpffs at /sys/fs/bpf,
// tmpfs where the runtime keeps state at fixed paths (ip netns's
// /run/netns for the "outside" namespace among them), and the loopback up.
// It joins the run's "harness" cgroup and returns the run's name.
func Setup() (string, error) {
	if !Inside() {
		return "", fmt.Errorf("node.Setup outside the node's namespaces")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount("bpffs", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
		return "", fmt.Errorf("mounting a private bpffs: %w", err)
	}
	for _, d := range privateDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return "", fmt.Errorf("mounting tmpfs on %s: %w", d, err)
		}
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	name := CgroupName()
	_, v2, err := hierarchies()
	if err != nil {
		return "", err
	}
	procs := filepath.Join(v2, name, "harness", "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", fmt.Errorf("joining %s: %w", procs, err)
	}
	return name, nil
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
