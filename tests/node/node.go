package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/testkit"
)

// NodeBinaries are what a node needs from the tools directory
// (tests/e2e/tools/build.sh --node); the suite's e2e.test comes last.
var NodeBinaries = append(append([]string{}, cluster.ControlPlaneBinaries...), "kube-scheduler", "kubelet", "kube-proxy", "agnhost", "coredns")

// Node is the control plane, containerd and a kubelet whose node is Ready.
// No proxy runs yet: InstallSocklb or StartKubeProxy adds one.
type Node struct {
	Dir, Tools string
	Cgroups    *Cgroups
	CP         *cluster.ControlPlane
	Containerd *Containerd
	Kubelet    *testkit.Proc
}

// Start brings the node up inside the namespaces of Setup, imports the
// image tarballs, and waits until the Node is Ready. It stops what it
// started if anything fails.
func Start(tools, dir string, cg *Cgroups, images []string) (n *Node, err error) {
	n = &Node{Dir: dir, Tools: tools, Cgroups: cg}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if err := SetupBridge(); err != nil {
		return n, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "control-plane"), 0o755); err != nil {
		return n, err
	}
	n.CP, err = cluster.StartWith(tools, filepath.Join(dir, "control-plane"), cluster.Options{
		Address: NodeIP,
		// All of kube-controller-manager's default controllers: the
		// suite uses ReplicationControllers, Deployments, Jobs, the
		// garbage collector and the root CA ConfigMap pods mount.
		Controllers: "*",
		Scheduler:   true,
	})
	if err != nil {
		return n, fmt.Errorf("control plane: %w", err)
	}
	n.Containerd, err = StartContainerd(filepath.Join(dir, "containerd"))
	if err != nil {
		return n, fmt.Errorf("containerd: %w", err)
	}
	for _, img := range images {
		if err := n.Containerd.Import(img); err != nil {
			return n, err
		}
	}
	n.Kubelet, err = StartKubelet(tools, filepath.Join(dir, "kubelet"), n.CP.AdminKubeconfig, n.Containerd.Socket, cg.Name)
	if err != nil {
		return n, err
	}
	start := time.Now()
	if err := n.Kubelet.WaitFor("the Node to be Ready", 3*time.Minute, func() error {
		node, err := n.CP.Admin.CoreV1().Nodes().Get(context.Background(), NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
			}
		}
		return fmt.Errorf("no Ready condition yet")
	}); err != nil {
		return n, err
	}
	cluster.Logf("node %s Ready in %s (kubelet pid %d)", NodeName, time.Since(start).Round(time.Millisecond), n.Kubelet.Pid())
	return n, nil
}

// Stop stops kubelet, containerd and the control plane by PID. The pods'
// processes and the shims are in the run's cgroup, which Enter's parent
// empties; their mounts and network namespaces die with the run's.
func (n *Node) Stop() {
	if n == nil {
		return
	}
	if n.Kubelet != nil {
		n.Kubelet.Stop(15 * time.Second)
	}
	n.Containerd.Stop()
	n.CP.Stop()
}

// LogTails is the end of every log, for a failure report: the processes'
// and every container's (read from kubelet's podLogsDir, so it needs no
// working API server or kubelet).
func (n *Node) LogTails(lines int) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "kubelet", "pod-logs", "*", "*", "*.log"))
	for _, l := range logs {
		p := &testkit.Proc{LogPath: l}
		fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", l, p.Tail(lines))
	}
	if n.CP != nil {
		b.WriteString(n.CP.LogTails(lines))
	}
	for _, p := range []*testkit.Proc{n.Kubelet, n.containerdProc()} {
		if p != nil {
			fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", p.LogPath, p.Tail(lines))
		}
	}
	return b.String()
}

func (n *Node) containerdProc() *testkit.Proc {
	if n.Containerd == nil {
		return nil
	}
	return n.Containerd.Proc
}
