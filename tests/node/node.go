package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/testkit"
)

// NodeBinaries are what a node needs from the tools directory
// (tests/e2e/tools/build.sh --node); the suite's e2e.test comes last.
var NodeBinaries = append(append([]string{}, cluster.ControlPlaneBinaries...), "kube-scheduler", "kubelet", "kube-proxy", "agnhost", "coredns", "regression-issue-74839", "ginkgo")

// Cluster is the control plane on the underlay and N nodes, each a
// process in a network and mount namespace of its own running containerd
// and a kubelet whose Node is Ready (and kube-proxy, for the control).
type Cluster struct {
	Dir, Tools string
	Run        string // the run's cgroup: /<Run>/<node name> is each kubelet's cgroupRoot
	CP         *cluster.ControlPlane
	Nodes      []*NodeProc
}

// Options are what Start needs beyond the tools and the directory.
type Options struct {
	Nodes     int      // how many (1..9)
	Images    []string // OCI tarballs every node imports
	KubeProxy bool     // run kube-proxy v1.37.2 on every node (the control)
	DiskGB    int      // each node's ext4 disk (sparse)
}

// Start brings the cluster up inside the harness's namespaces (Setup):
// the underlay and the "outside" namespace, the control plane on the
// underlay, then every node, and waits until every Node is Ready. It
// stops what it started if anything fails.
func Start(tools, dir, run string, o Options) (c *Cluster, err error) {
	c = &Cluster{Dir: dir, Tools: tools, Run: run}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	specs := Specs(o.Nodes)
	if err := SetupUnderlay(specs); err != nil {
		return c, err
	}
	if err := SetupOutside(); err != nil {
		return c, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "control-plane"), 0o755); err != nil {
		return c, err
	}
	c.CP, err = cluster.StartWith(tools, filepath.Join(dir, "control-plane"), cluster.Options{
		Address: ControlPlaneIP,
		// All of kube-controller-manager's default controllers: the
		// suite uses ReplicationControllers, Deployments, Jobs, the
		// garbage collector and the root CA ConfigMap pods mount.
		Controllers: "*",
		Scheduler:   true,
	})
	if err != nil {
		return c, fmt.Errorf("control plane: %w", err)
	}
	_, v2, err := hierarchies()
	if err != nil {
		return c, err
	}
	// All at once: each imports the images, which is most of a node's
	// start.
	procs := make([]*NodeProc, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			procs[i], errs[i] = StartNode(&NodeConfig{
				Spec: s, All: specs,
				Dir:        filepath.Join(dir, s.Name),
				Tools:      tools,
				Images:     o.Images,
				Kubeconfig: c.CP.AdminKubeconfig,
				CgroupV2:   filepath.Join(v2, run, s.Name),
				CgroupRoot: "/" + run + "/" + s.Name,
				KubeProxy:  o.KubeProxy,
				DiskGB:     o.DiskGB,
			})
			if errs[i] == nil {
				cluster.Logf("node %s started in %s (pid %d)", s.Name, time.Since(start).Round(time.Millisecond), procs[i].Pid())
			}
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if p != nil {
			c.Nodes = append(c.Nodes, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	start := time.Now()
	if err := c.CP.APIServer.WaitFor("every Node to be Ready", 5*time.Minute, c.nodesReady); err != nil {
		return c, err
	}
	cluster.Logf("%d nodes Ready in %s", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	return c, nil
}

func (c *Cluster) nodesReady() error {
	for _, p := range c.Nodes {
		if !p.proc.Alive() {
			return fmt.Errorf("node %s exited:\n%s", p.Spec.Name, p.Tail(40))
		}
		node, err := c.CP.Admin.CoreV1().Nodes().Get(context.Background(), p.Spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("%s not Ready", p.Spec.Name)
		}
	}
	return nil
}

// WaitFor polls cond until it holds, the API server exits or the timeout
// passes.
func (c *Cluster) WaitFor(what string, timeout time.Duration, cond func() error) error {
	return c.CP.APIServer.WaitFor(what, timeout, cond)
}

// Stop stops every node (each stops its processes by pid) and the
// control plane by pid. What outlives them is in the run's cgroup, which
// Enter's parent empties.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		c.Nodes[i].Stop()
	}
	c.CP.Stop()
}

// NodeByName is the node called name, or nil.
func (c *Cluster) NodeByName(name string) *NodeProc {
	for _, p := range c.Nodes {
		if p.Spec.Name == name {
			return p
		}
	}
	return nil
}

// LogTails is the end of every log, for a failure report: the processes'
// and every container's (read from kubelet's podLogsDir, so it needs no
// working API server or kubelet).
func (c *Cluster) LogTails(lines int) string {
	var b strings.Builder
	for _, p := range c.Nodes {
		logs, _ := filepath.Glob(filepath.Join(p.Cfg.Dir, "kubelet", "pod-logs", "*", "*", "*.log"))
		for _, l := range logs {
			t := &testkit.Proc{LogPath: l}
			fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", l, t.Tail(lines))
		}
		for _, l := range []string{"node.log", "containerd/containerd.log", "kubelet/kubelet.log", "kube-proxy/kube-proxy.log"} {
			path := filepath.Join(p.Cfg.Dir, l)
			if _, err := os.Stat(path); err == nil {
				t := &testkit.Proc{LogPath: path}
				fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", path, t.Tail(lines))
			}
		}
	}
	if c.CP != nil {
		b.WriteString(c.CP.LogTails(lines))
	}
	return b.String()
}
