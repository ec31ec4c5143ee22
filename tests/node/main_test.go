//go:build node

// The real-node tests run only through `make conformance` (build tag
// "node"): they need root, the node binaries of tests/e2e/tools
// (build.sh --node), containerd, runc, the CNI plugins, debootstrap and
// busybox-static, and they take minutes.
package node_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/tests/node"
)

var (
	proxy     = flag.String("proxy", "socklb", "the Service proxy of the node: socklb (deploy/ through a kustomize overlay, as a DaemonSet), socklb-helm (charts/socklb, helm install; helm uninstall at the end) or kube-proxy (v1.37.2, iptables mode: the control)")
	reportDir = flag.String("report-dir", "", "where TestConformance writes e2e.test's JUnit report (default: the run's directory)")
	focus     = flag.String("focus", node.DefaultFocus, "e2e.test --ginkgo.focus")
	skip      = flag.String("skip", "", "e2e.test --ginkgo.skip (default: node.Skip for -nodes)")
	nodes     = flag.Int("nodes", 3, "how many nodes (1..9): each its own network and mount namespace, containerd, kubelet and child cgroup")
	procs     = flag.Int("procs", 4, "ginkgo processes for TestConformance ([Serial] tests run alone at the end); 1 runs e2e.test directly")
	hold      = flag.Duration("hold", 0, "after the tests, keep the cluster up this long (or until <run dir>/release exists, or SIGINT/SIGTERM) for a look by hand; <run dir>/hold.txt says how to reach it. The test binary's -timeout must cover it")

	n    *node.Cluster
	root string
)

// Environment variables the parent hands the child (Enter).
const (
	imagesEnv = "SOCKLB_NODE_IMAGES"
	toolsEnv  = "SOCKLB_NODE_TOOLS"
	dirEnv    = "SOCKLB_NODE_DIR"
	helmEnv   = "SOCKLB_NODE_HELM"
	socklbEnv = "SOCKLB_NODE_SOCKLB"
	// labclient for the "outside" namespace (multinode_test.go).
	labclientEnv = "SOCKLB_NODE_LABCLIENT"
)

// helmBin is the helm `make helm-tool` builds (tests/tools/helm), as
// TestHelmChart in tests/e2e finds it.
func helmBin() (string, error) {
	out, err := exec.Command("sh", filepath.Join(root, "tests/tools/helm/build.sh"), "--bin").Output()
	if err != nil {
		return "", fmt.Errorf("tests/tools/helm/build.sh --bin: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("-proxy=socklb-helm needs helm, not built (%s): run `make helm-tool`", bin)
	}
	return bin, nil
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if *skip == "" {
		*skip = node.Skip(*nodes)
	}
	var err error
	if root, err = testkit.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	if node.IsNodeProcess() {
		return node.NodeMain()
	}
	if !node.Inside() {
		return parent()
	}
	return child(m)
}

// parent prepares what needs the machine's network (the agnhost root
// filesystem) and the images, then runs the tests again inside the node's
// namespaces and cgroup, and removes that cgroup whatever happened.
func parent() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "node: needs root (namespaces, cgroups, containerd, kubelet, BPF)")
		return 1
	}
	switch *proxy {
	case "socklb", "kube-proxy":
	case "socklb-helm":
		// Found before the node starts: a missing helm should cost
		// seconds, not the node's start.
		bin, err := helmBin()
		if err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			return 1
		}
		os.Setenv(helmEnv, bin)
	default:
		fmt.Fprintf(os.Stderr, "node: -proxy=%q: want socklb, socklb-helm or kube-proxy\n", *proxy)
		return 2
	}
	if *nodes < 1 || *nodes > 9 {
		fmt.Fprintf(os.Stderr, "node: -nodes=%d: want 1..9\n", *nodes)
		return 2
	}
	if err := node.CleanStale(os.TempDir()); err != nil {
		fmt.Fprintln(os.Stderr, "node: cleaning up after an earlier run:", err)
		return 1
	}
	tools, reason := cluster.ToolsDir(root, node.NodeBinaries...)
	if reason != "" {
		fmt.Fprintln(os.Stderr, "node:", reason, "(make conformance builds them: tests/e2e/tools/build.sh --node)")
		return 1
	}
	cacheDir := filepath.Join(filepath.Dir(tools), "node")
	rootfs, err := node.AgnhostRootfs(cacheDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "socklb-node-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	defer os.RemoveAll(work)
	// The tools module's k8s.io/kubernetes: build.sh built agnhost from it,
	// so it is in the module cache.
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	list.Dir, list.Env = filepath.Join(root, "tests", "e2e", "tools"), append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	k8sDir, err := list.Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: finding k8s.io/kubernetes' source for agnhost's files: %v\n", err)
		return 1
	}
	bins := node.Binaries{Agnhost: filepath.Join(tools, "agnhost"), AgnhostSource: filepath.Join(strings.TrimSpace(string(k8sDir)), "test", "images", "agnhost"),
		BusyBox: "/bin/busybox", CoreDNS: filepath.Join(tools, "coredns"), Regression74839: filepath.Join(tools, "regression-issue-74839")}
	if bins.Socklb, err = testkit.BuildAgent(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	defer testkit.RemoveAgent()
	if bins.Labclient, err = lab.BuildLabclient(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	defer lab.RemoveLabclient()
	images, err := node.BuildImages(work, rootfs, bins)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node: images:", err)
		return 1
	}
	// The run's directory is removed here, once the child's mount
	// namespace is gone: while it lives, container root filesystems
	// under it hold bind mounts of the machine's cgroup2 and bpffs.
	dir, err := os.MkdirTemp("", "socklb-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	os.Setenv(imagesEnv, strings.Join(images, ","))
	os.Setenv(toolsEnv, tools)
	os.Setenv(dirEnv, dir)
	os.Setenv(socklbEnv, bins.Socklb)
	os.Setenv(labclientEnv, bins.Labclient)
	code, err := node.Enter(dir, node.Specs(*nodes))
	if os.Getenv("SOCKLB_NODE_KEEP") == "" {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "node: kept", dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	return code
}

// holdCluster keeps the cluster up for a look by hand: it writes
// <run dir>/hold.txt (how to reach the API server and each node's
// namespaces from the machine) and returns after d, when <run dir>/release
// exists, or on SIGINT/SIGTERM; the usual teardown follows.
func holdCluster(d time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "harness pid %d (its network namespace holds the underlay and the API server)\n", os.Getpid())
	fmt.Fprintf(&b, "kubectl: nsenter -t %d -n -- %s --kubeconfig %s ...\n", os.Getpid(), filepath.Join(n.Tools, "kubectl"), n.CP.AdminKubeconfig)
	for _, p := range n.Nodes {
		fmt.Fprintf(&b, "node %s (%s): nsenter -t %d -n -m -- ...\n", p.Spec.Name, p.Spec.IP, p.Pid())
	}
	release := filepath.Join(n.Dir, "release")
	fmt.Fprintf(&b, "until %s, or: touch %s\n", time.Now().Add(d).Format(time.RFC3339), release)
	_ = os.WriteFile(filepath.Join(n.Dir, "hold.txt"), []byte(b.String()), 0o644)
	fmt.Printf("node: holding the cluster:\n%s", b.String())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	deadline := time.After(d)
	for {
		select {
		case <-deadline:
			return
		case s := <-sigs:
			fmt.Printf("node: %v: ending the hold\n", s)
			return
		case <-tick.C:
			if _, err := os.Stat(release); err == nil {
				fmt.Println("node: released")
				return
			}
		}
	}
}

// isSocklb reports whether socklb is this node's proxy, however installed.
func isSocklb() bool { return *proxy == "socklb" || *proxy == "socklb-helm" }

// child runs inside the harness's namespaces: the cluster, the proxy,
// the tests.
func child(m *testing.M) int {
	run, err := node.Setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node: setup:", err)
		return 1
	}
	start := time.Now()
	n, err = node.Start(os.Getenv(toolsEnv), os.Getenv(dirEnv), run, node.Options{
		Nodes:     *nodes,
		Images:    strings.Split(os.Getenv(imagesEnv), ","),
		KubeProxy: *proxy == "kube-proxy",
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: start: %v\n%s", err, n.LogTails(30))
		return 1
	}
	defer n.Stop()
	fmt.Printf("node: %d-node cluster up in %s\n", *nodes, time.Since(start).Round(time.Second))
	switch *proxy {
	case "socklb", "socklb-helm":
		install := func() error { return n.InstallSocklb(root) }
		if *proxy == "socklb-helm" {
			install = func() error { return n.InstallSocklbHelm(os.Getenv(helmEnv), root) }
		}
		if err := install(); err != nil {
			out, _ := n.Kubectl("-n", "kube-system", "describe", "pods")
			logs, _ := n.Kubectl("-n", "kube-system", "logs", "--all-containers", "-l", "app.kubernetes.io/name=socklb", "--tail=50")
			fmt.Fprintf(os.Stderr, "node: socklb: %v\n%s\n%s\n%s", err, out, logs, n.LogTails(30))
			return 1
		}
	}
	if err := n.InstallDNS(); err != nil {
		fmt.Fprintf(os.Stderr, "node: cluster DNS: %v\n%s", err, n.LogTails(30))
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "node: tests failed; logs:\n%s", n.LogTails(40))
	}
	if *hold > 0 {
		holdCluster(*hold)
	}
	if isSocklb() {
		if err := n.CheckHooks(true); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			code = 1
		}
	}
	if *proxy == "socklb-helm" {
		// The chart's whole life on the node: after the tests (and
		// TestHelmUpgradeUnderLoad), the uninstall a user does.
		if err := n.UninstallSocklbHelm(os.Getenv(helmEnv), root); err != nil {
			fmt.Fprintln(os.Stderr, "node: FAIL:", err)
			code = 1
		} else {
			fmt.Println("node: the chart's cleanup mode + helm uninstall: no socklb object, pin, link or mount left on any node")
		}
	}
	return code
}
