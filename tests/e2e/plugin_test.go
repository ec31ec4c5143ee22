package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubectlSocklb builds cmd/kubectl-socklb and returns a runner using the
// admin kubeconfig; it returns stdout, then stdout and stderr together.
func kubectlSocklb(t *testing.T) func(args ...string) (string, string, error) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-socklb")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-socklb")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-socklb: %v\n%s", err, out)
	}
	return func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stdout.String() + stderr.String(), err
	}
}

// agentPod creates a pod that looks like a DaemonSet's agent pod on node,
// with the status a kubelet would write. There is no kubelet here, so
// exec into a Running one fails at the API server: only what happens
// before exec, and its error, can be checked here (tests/node runs exec).
func agentPod(t *testing.T, ns, name, node string, status corev1.PodStatus) {
	t.Helper()
	ctx := context.Background()
	pods := cp.Admin.CoreV1().Pods(ns)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "socklb"}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "socklb", Image: "localhost/socklb:dev", Command: []string{"/socklb", "agent"},
				Args: []string{"--bpffs-path=/sys/fs/bpf/socklb", "--healthz-bind-address=0.0.0.0:10356"}}},
		},
	}
	p, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	p.Status = status
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKubectlPluginFindsAgents: kubectl socklb picks the agent pod by
// node, and every way it cannot names the nodes, the pod and the fix.
func TestKubectlPluginFindsAgents(t *testing.T) {
	needCluster(t)
	run := kubectlSocklb(t)
	ctx := context.Background()
	ns, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-plugin-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})

	_, out, err := run("-n", ns.Name, "status")
	if err == nil || !strings.Contains(out, "no socklb pod (app.kubernetes.io/name=socklb) in namespace "+ns.Name) || !strings.Contains(out, "pass -n NAMESPACE") {
		t.Errorf("status with no agent pod: %v\n%s", err, out)
	}

	now := metav1.NewTime(time.Now())
	agentPod(t, ns.Name, "socklb-a", nodeName, corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "socklb", Image: "localhost/socklb:dev", Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}})
	agentPod(t, ns.Name, "socklb-b", "node-b", corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "socklb", Image: "localhost/socklb:dev",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}})

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no --node with two agents", []string{"inspect"}, []string{"socklb runs on 2 nodes (node-a, node-b): choose one with --node NODE"}},
		{"a node without an agent", []string{"inspect", "--node", "node-z"}, []string{`no socklb pod on node "node-z"`, "run on: node-a, node-b", "nodeSelector"}},
		{"an agent pod not Running", []string{"inspect", "--node", "node-b", "default/kubernetes"}, []string{
			"pod " + ns.Name + "/socklb-b on node node-b is Pending (socklb: ImagePullBackOff), not Running",
			"kubectl -n " + ns.Name + " describe pod socklb-b"}},
		// No kubelet: the API server cannot open the exec stream. What
		// matters is that exec was tried in the right pod and that the
		// error names it. inspect first asks socklb status there for the
		// agent's pin directory; neither passes the pod's args on (the
		// agent's --config may override them: cmd/kubectl-socklb's tests).
		{"exec in the node's pod", []string{"inspect", "--node", "node-a", "default/kubernetes"}, []string{
			"[/socklb status -o json] in pod " + ns.Name + "/socklb-a on node node-a"}},
		{"status", []string{"status"}, []string{"NODE", "node-b", "Pending", "2 agents not healthy",
			"node-b: pod " + ns.Name + "/socklb-b on node node-b is Pending (socklb: ImagePullBackOff)",
			"node-a: [/socklb status -o json] in pod " + ns.Name + "/socklb-a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, out, err := run(append([]string{"-n", ns.Name}, c.args...)...)
			if err == nil {
				t.Errorf("kubectl socklb %v exits 0:\n%s", c.args, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("kubectl socklb %v lacks %q:\n%s", c.args, w, out)
				}
			}
		})
	}

	out, _, _ = run("-n", ns.Name, "status", "-o", "json")
	var got []struct {
		Node, Pod, Phase, Error string
		Status                  any
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 || got[0].Node != nodeName || got[1].Phase != "Pending" || got[1].Error == "" {
		t.Errorf("status -o json: %v: %+v\n%s", err, got, out)
	}
}
