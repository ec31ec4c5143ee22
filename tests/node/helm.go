package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
)

// Helm is the release name and namespace the chart is installed under, as
// docs/install.md tells a user to.
const (
	HelmRelease   = "socklb"
	HelmNamespace = "kube-system"
	// BPFFSPath is where the chart's agent pins (values.yaml bpffsPath),
	// in the node's own bpffs.
	BPFFSPath = "/sys/fs/bpf/socklb"
	// cgroupMount is where the chart's init container mounts the node's
	// cgroup2 tree (deploy/'s too).
	cgroupMount = "/run/socklb/cgroupv2"
)

// HelmValues are what a user of this node sets on the chart, the same
// things the kustomize overlay sets on deploy/: the image imported on the
// node (never pulled), the run's cgroup (never the root), and the API
// server's address, which the agent must reach without the `kubernetes`
// Service it has not programmed yet.
func (n *Cluster) HelmValues() []string {
	host, port := n.apiServer()
	repo, tag, _ := strings.Cut(SocklbImage, ":")
	return []string{
		"image.repository=" + repo,
		"image.tag=" + tag,
		"image.pullPolicy=IfNotPresent",
		"cgroupPath=" + cgroupMount + "/" + n.Run + "/$(NODE_NAME)",
		"externalIPCIDRs={" + ExternalCIDR + "}",
		"devices={" + UnderlayDevice + "}",
		"apiServer.host=" + host,
		"apiServer.port=" + port,
	}
}

// Helm runs helm (tests/tools/helm, `make helm-tool`) as the node's admin,
// with its caches in the run's directory.
func (n *Cluster) Helm(bin string, args ...string) (string, error) {
	home := filepath.Join(n.Dir, "helm")
	cmd := exec.Command(bin, append([]string{"--kubeconfig", n.CP.AdminKubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// InstallSocklbHelm installs charts/socklb as a user would (`helm install`
// with --set) and waits until the agent serves (waitSocklbReady).
func (n *Cluster) InstallSocklbHelm(helm, repoRoot string) error {
	args := []string{"install", HelmRelease, filepath.Join(repoRoot, "charts", "socklb"), "-n", HelmNamespace}
	for _, v := range n.HelmValues() {
		args = append(args, "--set", v)
	}
	out, err := n.Helm(helm, args...)
	if err != nil {
		return fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	cluster.Logf("helm %s:\n%s", strings.Join(args, " "), out)
	return n.waitSocklbReady()
}

// UninstallSocklbHelm removes socklb as docs/uninstall.md tells a user
// to, with no shell on any node: the chart's cleanup mode (`helm upgrade
// --reuse-values --set cleanup=true --wait`: every node's pod unpins
// socklb's objects and unmounts its cgroup2, then waits), then `helm
// uninstall`. It then checks that nothing of socklb is left: no object of
// the chart, no pin, no program on the run's cgroup or the root, no mount.
func (n *Cluster) UninstallSocklbHelm(helm, repoRoot string) error {
	args := []string{"upgrade", HelmRelease, filepath.Join(repoRoot, "charts", "socklb"), "-n", HelmNamespace, "--reuse-values", "--set", "cleanup=true", "--wait", "--timeout", "3m"}
	if out, err := n.Helm(helm, args...); err != nil {
		return fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// Helm's --wait lets a DaemonSet be maxUnavailable pods short of
	// ready; `kubectl rollout status`, which docs/uninstall.md has the
	// user run, waits for all. A pod of cleanup mode is ready only once
	// its init container, socklb cleanup, succeeded.
	if err := n.WaitFor("every node's cleanup pod to be ready", 3*time.Minute, func() error {
		ds, err := n.CP.Admin.AppsV1().DaemonSets(HelmNamespace).Get(context.Background(), "socklb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := ds.Status; s.ObservedGeneration != ds.Generation || s.UpdatedNumberScheduled != int32(len(n.Nodes)) || s.NumberReady != int32(len(n.Nodes)) || s.NumberAvailable != int32(len(n.Nodes)) {
			return fmt.Errorf("%d of %d nodes updated, %d ready", s.UpdatedNumberScheduled, len(n.Nodes), s.NumberReady)
		}
		return nil
	}); err != nil {
		return err
	}
	if out, err := n.Helm(helm, "uninstall", HelmRelease, "-n", HelmNamespace, "--wait", "--timeout", "2m"); err != nil {
		return fmt.Errorf("helm uninstall %s -n %s: %v\n%s", HelmRelease, HelmNamespace, err, out)
	}
	ctx := context.Background()
	pods := n.CP.Admin.CoreV1().Pods(HelmNamespace)
	if err := n.WaitFor("socklb's pod to be gone", 2*time.Minute, func() error {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=socklb"})
		if err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return fmt.Errorf("pod %s still there (%s)", l.Items[0].Name, l.Items[0].Status.Phase)
		}
		return nil
	}); err != nil {
		return err
	}
	return n.checkSocklbGone()
}

// checkSocklbGone lists what a socklb install leaves when it is not
// removed: the chart's objects and Helm's release record, pins, the
// hooks, the cgroup2 mount.
func (n *Cluster) checkSocklbGone() error {
	ctx := context.Background()
	a := n.CP.Admin
	var left []string
	gone := func(what string, err error) {
		if err == nil {
			left = append(left, what)
		} else if !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("%s (%v)", what, err))
		}
	}
	_, err := a.AppsV1().DaemonSets(HelmNamespace).Get(ctx, "socklb", metav1.GetOptions{})
	gone("DaemonSet "+HelmNamespace+"/socklb", err)
	_, err = a.CoreV1().ServiceAccounts(HelmNamespace).Get(ctx, "socklb", metav1.GetOptions{})
	gone("ServiceAccount "+HelmNamespace+"/socklb", err)
	_, err = a.RbacV1().ClusterRoles().Get(ctx, "socklb", metav1.GetOptions{})
	gone("ClusterRole socklb", err)
	_, err = a.RbacV1().ClusterRoleBindings().Get(ctx, "socklb", metav1.GetOptions{})
	gone("ClusterRoleBinding socklb", err)
	_, err = a.CoreV1().Services(HelmNamespace).Get(ctx, "socklb-metrics", metav1.GetOptions{})
	gone("Service "+HelmNamespace+"/socklb-metrics", err)
	// Helm keeps a release's history in Secrets labelled with its name;
	// uninstall without --keep-history deletes them.
	secrets, err := a.CoreV1().Secrets(HelmNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + HelmRelease})
	if err != nil {
		left = append(left, fmt.Sprintf("Helm's release Secrets (%v)", err))
	} else {
		for _, s := range secrets.Items {
			left = append(left, "Secret "+HelmNamespace+"/"+s.Name)
		}
	}
	for _, p := range n.Nodes {
		if _, err := os.Stat(p.Path(BPFFSPath)); !os.IsNotExist(err) {
			left = append(left, p.Spec.Name+": pin directory "+BPFFSPath)
		}
		if mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p.Pid())); err != nil {
			left = append(left, fmt.Sprintf("%s: reading mountinfo (%v)", p.Spec.Name, err))
		} else if strings.Contains(string(mounts), " "+cgroupMount+" ") {
			left = append(left, p.Spec.Name+": mount "+cgroupMount)
		}
	}
	if err := n.CheckHooks(false); err != nil {
		left = append(left, err.Error())
	}
	left = append(left, n.socklbLinks()...)
	if len(left) > 0 {
		return fmt.Errorf("after the chart's cleanup mode and helm uninstall, socklb left: %s", strings.Join(left, "; "))
	}
	return nil
}

// tcxPrograms counts the programs on dev's tcx ingress and egress in the
// network namespace of process pid, queried from a thread moved there.
func tcxPrograms(pid int, dev string) (int, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return 0, err
	}
	defer ns.Close()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in ns
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{0, err}
			return
		}
		iface, err := net.InterfaceByName(dev)
		if err != nil {
			done <- result{0, err}
			return
		}
		total := 0
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: iface.Index, Attach: at})
			if err != nil {
				done <- result{0, err}
				return
			}
			total += len(res.Programs)
		}
		done <- result{total, nil}
	}()
	r := <-done
	return r.n, r.err
}

// socklbLinks lists the nodes' cgroup and device (tcx) attachments of any
// socklb program (their names start socklb_), waiting up to 10 s: the
// kernel frees an unpinned link from a workqueue.
func (n *Cluster) socklbLinks() []string {
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left = nil
		for _, p := range n.Nodes {
			cg, err := exec.Command("bpftool", "cgroup", "show", p.Cfg.CgroupV2).CombinedOutput()
			if err != nil || strings.Contains(string(cg), "socklb_") {
				left = append(left, fmt.Sprintf("%s: on its cgroup (%v): %s", p.Spec.Name, err, cg))
			}
			// Debian 12's bpftool lists no tcx links: ask the kernel.
			if n, err := tcxPrograms(p.Pid(), UnderlayDevice); err != nil || n > 0 {
				left = append(left, fmt.Sprintf("%s: %d programs on %s's tcx hooks (%v)", p.Spec.Name, n, UnderlayDevice, err))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}
