package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// roleEnv tells this binary, started again by StartNode, that it is one
// node: NodeMain runs instead of the tests.
const roleEnv = "SOCKLB_NODE_ROLE"

// IsNodeProcess reports whether this process is a node (StartNode's).
func IsNodeProcess() bool { return os.Getenv(roleEnv) == "node" }

// NodeConfig is what a node process needs, written as JSON by StartNode.
type NodeConfig struct {
	Spec       NodeSpec
	All        []NodeSpec
	Dir        string   // the node's directory: logs, configs; Disk below it
	Tools      string   // tests/e2e/tools' binaries
	Images     []string // OCI tarballs to import
	Kubeconfig string   // the admin's
	CgroupV2   string   // the node's own child in the v2 tree
	CgroupRoot string   // kubelet's cgroupRoot: /<run>/<node>
	KubeProxy  bool     // run kube-proxy v1.37.2 (the control)
	DiskGB     int      // the ext4 image kubelet's and containerd's roots live on
}

// Disk is where the node's ext4 image is mounted (inside its own mount
// namespace only): kubelet's root-dir and containerd's root, on a
// filesystem cadvisor measures, so ephemeral-storage is real.
func (c *NodeConfig) Disk() string { return filepath.Join(c.Dir, "disk") }

// NodeProc is a running node as the harness sees it: a process in a
// network and mount namespace of its own, in its own child cgroup.
type NodeProc struct {
	Spec  NodeSpec
	Cfg   *NodeConfig
	proc  *testkit.Proc
	stdin io.WriteCloser
}

// Pid is the node process's: nsenter -t Pid reaches the node's
// namespaces, /proc/Pid/root its mounts.
func (p *NodeProc) Pid() int { return p.proc.Pid() }

// Path is p as the node's own processes see it (its bpffs, its disk).
func (p *NodeProc) Path(path string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", p.Pid()), path)
}

// Exec runs a command in the node's network and mount namespaces.
func (p *NodeProc) Exec(args ...string) (string, error) {
	full := append([]string{"-t", strconv.Itoa(p.Pid()), "-n", "-m", "--"}, args...)
	out, err := exec.Command("nsenter", full...).CombinedOutput()
	return string(out), err
}

// StartNode starts this binary again as node cfg.Spec in a new network and
// mount namespace, gives it its underlay link, and waits until containerd
// and kubelet run (the Node's readiness is the caller's to wait for).
func StartNode(cfg *NodeConfig) (*NodeProc, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(cfg.Dir, "node.json")
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &NodeProc{Spec: cfg.Spec, Cfg: cfg}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=node", "SOCKLB_NODE_CONFIG="+cfgPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.proc, err = testkit.StartProcCmd("node "+cfg.Spec.Name, filepath.Join(cfg.Dir, "node.log"), cmd); err != nil {
		return nil, err
	}
	if err := AttachNode(cfg.Spec, p.Pid()); err != nil {
		p.Stop()
		return nil, err
	}
	// The node configures eth0 and starts its processes.
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		p.Stop()
		return nil, fmt.Errorf("node %s: %w", cfg.Spec.Name, err)
	}
	ready := filepath.Join(cfg.Dir, "ready")
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			if s := strings.TrimSpace(string(b)); s != "ok" {
				p.Stop()
				return nil, fmt.Errorf("node %s: %s", cfg.Spec.Name, s)
			}
			return p, nil
		}
		select {
		case <-p.proc.Exited():
			return nil, fmt.Errorf("node %s exited (%v):\n%s", cfg.Spec.Name, p.proc.ExitErr(), p.Tail(40))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("node %s: not started in 10m:\n%s", cfg.Spec.Name, p.Tail(40))
		}
	}
}

// Tail is the end of the node process's own log.
func (p *NodeProc) Tail(n int) string { return p.proc.Tail(n) }

// Stop closes the node's stdin (it stops kube-proxy, kubelet and
// containerd by pid and unmounts its disk), and kills it by pid if it has
// not exited in time. Whatever it leaves in its cgroup, Enter's parent
// kills by cgroup.
func (p *NodeProc) Stop() {
	if p == nil || p.proc == nil {
		return
	}
	p.stdin.Close()
	select {
	case <-p.proc.Exited():
	case <-time.After(60 * time.Second):
		p.proc.Stop(time.Second)
	}
}

// NodeMain is the node process: it makes its mounts private, joins its
// cgroup, waits for its underlay link, configures its network, starts
// containerd (importing the images), kubelet and, for the control,
// kube-proxy, writes "ok" (or the error) to <dir>/ready, and stops
// everything when its stdin closes or SIGTERM comes.
func NodeMain() int {
	var cfg NodeConfig
	b, err := os.ReadFile(os.Getenv("SOCKLB_NODE_CONFIG"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	ready := filepath.Join(cfg.Dir, "ready")
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var procs []*testkit.Proc
	var unmount []string
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(15 * time.Second)
		}
		for i := len(unmount) - 1; i >= 0; i-- {
			if err := syscall.Unmount(unmount[i], syscall.MNT_DETACH); err != nil {
				fmt.Fprintf(os.Stderr, "node: unmounting %s: %v\n", unmount[i], err)
			}
		}
	}()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node:", err)
		_ = os.WriteFile(ready, []byte(err.Error()), 0o644)
		return 1
	}
	if err := os.WriteFile(filepath.Join(cfg.CgroupV2, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(fmt.Errorf("joining %s: %w", cfg.CgroupV2, err))
	}
	if err := nodeMounts(&cfg, &unmount); err != nil {
		return fail(err)
	}
	// The harness writes "go" once eth0 is in this namespace.
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "go" {
		return fail(fmt.Errorf("waiting for the underlay link: %q %v", line, err))
	}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	if err := SetupNodeNetwork(cfg.Spec, cfg.All); err != nil {
		return fail(err)
	}
	ctrd, err := StartContainerd(cfg.Spec, filepath.Join(cfg.Dir, "containerd"), filepath.Join(cfg.Disk(), "containerd"))
	if err != nil {
		return fail(fmt.Errorf("containerd: %w", err))
	}
	procs = append(procs, ctrd.Proc)
	for _, img := range cfg.Images {
		if err := ctrd.Import(img); err != nil {
			return fail(err)
		}
	}
	kl, err := StartKubelet(&cfg, ctrd.Socket)
	if err != nil {
		return fail(err)
	}
	procs = append(procs, kl)
	if cfg.KubeProxy {
		kp, err := StartKubeProxy(&cfg)
		if err != nil {
			return fail(fmt.Errorf("kube-proxy: %w", err))
		}
		procs = append(procs, kp)
	}
	if err := os.WriteFile(ready, []byte("ok"), 0o644); err != nil {
		return fail(err)
	}
	fmt.Printf("node %s: containerd %d, kubelet %d up\n", cfg.Spec.Name, ctrd.Proc.Pid(), kl.Pid())
	for {
		select {
		case <-stop:
			fmt.Println("node: stdin closed, stopping")
			return 0
		case s := <-sigs:
			fmt.Println("node: got", s, "stopping")
			return 0
		case <-time.After(5 * time.Second):
			for _, p := range procs {
				if !p.Alive() {
					fmt.Fprintf(os.Stderr, "node: %v\n", p.ExitedErr())
					return 1
				}
			}
		}
	}
}

// nodeMounts gives the node its own mounts: everything private (nothing
// propagates to the harness or the other nodes), a bpffs of its own,
// tmpfs where the runtime keeps state at fixed paths, and the ext4 disk,
// then shared again inside this namespace (the DaemonSet's Bidirectional
// volume needs it).
func nodeMounts(cfg *NodeConfig, unmount *[]string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount("bpffs", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting a private bpffs: %w", err)
	}
	*unmount = append(*unmount, "/sys/fs/bpf")
	for _, d := range privateDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mounting tmpfs on %s: %w", d, err)
		}
		*unmount = append(*unmount, d)
	}
	img := cfg.Dir + ".img"
	if err := MakeDisk(img, cfg.DiskGB); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Disk(), 0o755); err != nil {
		return err
	}
	// mount -o loop sets autoclear: the loop device goes with the mount,
	// also when the namespace dies with its last process.
	if out, err := exec.Command("mount", "-o", "loop", img, cfg.Disk()).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -o loop %s: %v: %s", img, err, out)
	}
	*unmount = append(*unmount, cfg.Disk())
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
		return fmt.Errorf("making the namespace's mounts shared: %w", err)
	}
	return nil
}

// MakeDisk makes a sparse ext4 image of gb GiB at path.
func MakeDisk(path string, gb int) error {
	if gb == 0 {
		gb = 20
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(gb) << 30); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", path).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", path, err, out)
	}
	return nil
}

// DetachLoops detaches any loop device still backed by img (by the
// image's path: the devices the run made), after a run that died before
// its mounts went away.
func DetachLoops(img string) error {
	out, err := exec.Command("losetup", "-j", img, "-O", "NAME", "-n").Output()
	if err != nil {
		return nil
	}
	var errs []error
	for _, dev := range strings.Fields(string(out)) {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup -d %s: %v: %s", dev, err, out))
		}
	}
	return errors.Join(errs...)
}
