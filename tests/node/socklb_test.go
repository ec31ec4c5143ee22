//go:build node

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/tests/labclient/wire"
	"github.com/socklb/socklb/tests/node"
)

// echo is a Service of agnhost serve-hostname pods (TCP and UDP on one
// port: each answers with its pod name) and a client pod running
// tests/labclient, in a namespace of the test's own. Every pod is bound
// to a node (spec.nodeName): by default all of them to the first.
type echo struct {
	t         *testing.T
	ns        string
	clusterIP string
	svc       *corev1.Service
	backends  []string
	// backendNode is where addBackend puts the next backend.
	backendNode string
}

// nodeName is node i's name (0-based), skipping the test when the
// cluster has fewer nodes.
func nodeName(t *testing.T, i int) string {
	t.Helper()
	if i >= len(n.Nodes) {
		t.Skipf("needs %d nodes, the cluster has %d (-nodes)", i+1, len(n.Nodes))
	}
	return n.Nodes[i].Spec.Name
}

func needSocklb(t *testing.T) {
	if !isSocklb() {
		t.Skipf("socklb's own real-node tests run with -proxy=socklb or -proxy=socklb-helm (this run: %s)", *proxy)
	}
}

func newEcho(t *testing.T, backends int) *echo {
	t.Helper()
	return newEchoWith(t, nodeName(t, 0), nodeName(t, 0), backends, nil)
}

// newEchoWith is newEcho with the client on clientNode, the first
// backends on backendNode, and change applied to the Service before it is
// created.
func newEchoWith(t *testing.T, clientNode, backendNode string, backends int, change func(*corev1.Service)) *echo {
	t.Helper()
	ctx := context.Background()
	e := &echo{t: t, ns: "sl-" + strings.ToLower(strings.ReplaceAll(t.Name(), "Test", "")), backendNode: backendNode}
	if len(e.ns) > 50 {
		e.ns = e.ns[:50]
	}
	c := n.CP.Admin.CoreV1()
	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{})
	})
	// The namespace's default ServiceAccount comes from the controller.
	waitFor(t, "the default ServiceAccount", 30*time.Second, func() error {
		_, err := c.ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	tcp, udp := testkit.ServicePort("tcp", corev1.ProtocolTCP, 80), testkit.ServicePort("udp", corev1.ProtocolUDP, 53)
	tcp.TargetPort, udp.TargetPort = intstr.FromInt32(9376), intstr.FromInt32(9376)
	echo := testkit.Service(e.ns+"/echo", "", tcp, udp)
	echo.Spec.Selector = map[string]string{"app": "echo"}
	if change != nil {
		change(echo)
	}
	svc, err := c.Services(e.ns).Create(ctx, echo, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.clusterIP = svc.Spec.ClusterIP
	for i := 0; i < backends; i++ {
		e.addBackend(fmt.Sprintf("echo-%d", i))
	}
	e.createPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{NodeName: clientNode, Containers: []corev1.Container{{
			Name: "client", Image: node.LabclientImage, ImagePullPolicy: corev1.PullNever,
		}}},
	})
	return e
}

// addBackend adds a serve-hostname pod. Its preStop hook keeps it serving
// for 30 s after it is deleted, as a real pod draining: a socket still
// connected to it would keep getting answers unless it is moved off.
func (e *echo) addBackend(name string) {
	e.createPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{
			NodeName:                      e.backendNode,
			TerminationGracePeriodSeconds: ptr.To[int64](40),
			Containers: []corev1.Container{{
				Name: "serve", Image: node.AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args:      []string{"serve-hostname", "--tcp", "--udp", "--http=false", "--port=9376"},
				Ports:     []corev1.ContainerPort{{ContainerPort: 9376, Protocol: corev1.ProtocolTCP}, {ContainerPort: 9376, Protocol: corev1.ProtocolUDP}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "30"}}}},
			}},
		},
	})
	e.backends = append(e.backends, name)
}

func (e *echo) createPod(p *corev1.Pod) {
	e.t.Helper()
	ctx := context.Background()
	c := n.CP.Admin.CoreV1().Pods(e.ns)
	if _, err := c.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	waitFor(e.t, "pod "+e.ns+"/"+p.Name+" Ready", 2*time.Minute, func() error {
		got, err := c.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s %v", got.Status.Phase, got.Status.ContainerStatuses)
	})
}

// client runs labclient in the client pod and decodes its result.
func (e *echo) client(ctx context.Context, args ...string) (*wire.Result, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.Tools, "kubectl"), append([]string{"--kubeconfig", n.CP.AdminKubeconfig,
		"-n", e.ns, "exec", "client", "--", "/labclient"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return nil, fmt.Errorf("labclient %v: %v: %s%s", args, err, out, msg)
	}
	var r wire.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("labclient %v printed %q: %w", args, out, err)
	}
	return &r, nil
}

// waitServing waits until TCP connects through the ClusterIP reach every
// backend: the EndpointSlice is written and socklb has programmed it.
func (e *echo) waitServing() {
	e.t.Helper()
	waitFor(e.t, "every backend behind "+e.clusterIP, time.Minute, func() error {
		r, err := e.client(context.Background(), "tcp", "--addr", e.clusterIP+":80", "--count", "30")
		if err != nil {
			return err
		}
		for _, b := range e.backends {
			if r.Replies[b] == 0 {
				return fmt.Errorf("%s not reached: %+v", b, r)
			}
		}
		return nil
	})
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPodToClusterIP: a pod's connects to a ClusterIP land on the pods of
// other containers, spread over both, and the application sees the
// ClusterIP as its peer.
func TestPodToClusterIP(t *testing.T) {
	needSocklb(t)
	e := newEcho(t, 2)
	e.waitServing()
	r, err := e.client(context.Background(), "tcp", "--addr", e.clusterIP+":80", "--count", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 connects from pod client to %s:80: %v, errors %v, peer %s", e.clusterIP, r.Replies, r.Errors, r.Peer)
	if r.OK != 100 || r.Replies["echo-0"] < 20 || r.Replies["echo-1"] < 20 {
		t.Errorf("want 100 answers spread over echo-0 and echo-1: %+v", r)
	}
	if r.Peer != e.clusterIP+":80" {
		t.Errorf("getpeername %q, want the ClusterIP %s:80", r.Peer, e.clusterIP)
	}
}

// TestInspectInAgentPod: `socklb inspect` inside the DaemonSet's pod
// prints the chain of a Service the pods use.
func TestInspectInAgentPod(t *testing.T) {
	needSocklb(t)
	e := newEcho(t, 2)
	e.waitServing()
	out, err := n.Kubectl("-n", "kube-system", "exec", agentPod(t, nodeName(t, 0)).Name, "-c", "socklb", "--", "/socklb", "inspect", "--bpffs-path=/sys/fs/bpf/socklb")
	if err != nil {
		t.Fatalf("socklb inspect in the agent pod: %v\n%s", err, out)
	}
	pods, err := n.CP.Admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{e.clusterIP + ":80/TCP", e.clusterIP + ":53/UDP", e.ns + "/echo:tcp"}
	for _, p := range pods.Items {
		want = append(want, p.Status.PodIP+":9376")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("inspect lacks %q:\n%s", w, out)
		}
	}
	t.Logf("socklb inspect in the agent pod:\n%s", out)
}

// TestConnectedUDPMovedOffDeletedBackend: a pod's connected UDP socket
// talks to one backend; that backend's pod is deleted and keeps serving
// while it drains (preStop, 30 s). As kube-proxy keeps a UDP flow while its
// endpoint serves (conntrack.CleanStaleEntries), the socket keeps its
// answers from the draining pod; once the pod is gone and its endpoint with
// it, the agent, which sees the pod's socket only through the host's /proc
// (hostPID), destroys it, and the client reconnects and lands on the live
// backend. Without socket termination it would time out from then on.
func TestConnectedUDPMovedOffDeletedBackend(t *testing.T) {
	needSocklb(t)
	e := newEcho(t, 2)
	e.waitServing()
	ctx := context.Background()
	type out struct {
		r   *wire.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		// 50 s: the drain and the pod's exit, then answers from the live one.
		r, err := e.client(ctx, "udp-connected", "--addr", e.clusterIP+":53", "--count", "200", "--interval", "250ms", "--timeout", "3s", "--seq")
		done <- out{r, err}
	}()
	// Which backend holds the socket: the one that logged its datagrams.
	var held string
	waitFor(t, "the UDP client's first datagrams", 30*time.Second, func() error {
		for _, b := range e.backends {
			logs, err := n.Kubectl("-n", e.ns, "logs", b)
			if err == nil && strings.Contains(logs, "UDP request from") {
				held = b
				return nil
			}
		}
		return fmt.Errorf("no backend logged a UDP request")
	})
	if err := n.CP.Admin.CoreV1().Pods(e.ns).Delete(ctx, held, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %s, which held the socket", held)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	seq := o.r.Sequence
	t.Logf("answers: %s", strings.Join(seq, " "))
	if len(seq) == 0 || seq[0] != held {
		t.Fatalf("sequence %v: want it to start on %s", seq, held)
	}
	moved := -1
	for i, s := range seq {
		if s != held {
			moved = i
			break
		}
	}
	if moved < 0 || seq[len(seq)-1] == held {
		t.Fatalf("the connected socket never left the deleted backend %s: %v", held, seq)
	}
	// Deleted early on, the pod drained for 30 s: about 120 answers at
	// 250 ms. 40 (10 s) tells a socket kept while its endpoint serves from
	// one destroyed as soon as the pod was deleted.
	if moved < 40 {
		t.Errorf("the socket left %s after %d answers, while the pod still served (preStop 30 s): kube-proxy keeps the flow until its endpoint stops serving; %v", held, moved, seq)
	}
	// Between the pod's exit and its endpoint's removal the socket has
	// nowhere to go, as a kube-proxy flow has not: a query or two may time
	// out there (3 s each), not after the socket moved.
	rest, timeouts := seq[moved:], 0
	for len(rest) > 0 && !slices.Contains(e.backends, rest[0]) {
		if rest[0] == "timeout" {
			timeouts++
		}
		rest = rest[1:]
	}
	if timeouts > 2 {
		t.Errorf("%d timeouts before the socket moved: it was not destroyed once its endpoint went, but starved: %v", timeouts, seq)
	}
	for _, s := range rest {
		if s == held {
			t.Errorf("answers from %s after the socket moved off it: %v", held, seq)
			break
		}
		if s == "timeout" {
			t.Errorf("a timeout after the socket moved: %v", seq)
			break
		}
	}
}

// agentPod is the socklb pod on node name.
func agentPod(t *testing.T, name string) corev1.Pod {
	t.Helper()
	l, err := n.CP.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=socklb", FieldSelector: "spec.nodeName=" + name})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("socklb pods on %s: %v %v", name, l, err)
	}
	return l.Items[0]
}

// TestAgentPodRecreatedUnderLoad: the agent's pod on the client's node is
// deleted while the client connects in a loop to a ClusterIP whose
// endpoints are on the other nodes; the DaemonSet makes a new one, which
// adopts the pinned datapath. Not one connect fails.
func TestAgentPodRecreatedUnderLoad(t *testing.T) {
	needSocklb(t)
	client := nodeName(t, 0)
	if len(n.Nodes) > 1 {
		client = nodeName(t, 1)
	}
	e := newEchoWith(t, client, nodeName(t, 0), 1, nil)
	if len(n.Nodes) > 2 {
		e.backendNode = nodeName(t, 2)
	}
	e.addBackend("echo-1")
	e.waitServing()
	ctx := context.Background()
	pods := n.CP.Admin.CoreV1().Pods("kube-system")
	old := &corev1.PodList{Items: []corev1.Pod{agentPod(t, client)}}
	type out struct {
		r   *wire.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := e.client(ctx, "loop", "--addr", e.clusterIP+":80", "--duration", "45s", "--interval", "2ms", "--timeout", "2s")
		done <- out{r, err}
	}()
	time.Sleep(5 * time.Second)
	if err := pods.Delete(ctx, old.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted the agent's pod %s", old.Items[0].Name)
	waitFor(t, "a new Ready socklb pod", 40*time.Second, func() error {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=socklb", FieldSelector: "spec.nodeName=" + client})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.UID == old.Items[0].UID {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					t.Logf("new agent pod %s Ready", p.Name)
					return nil
				}
			}
		}
		return fmt.Errorf("no new Ready pod yet")
	})
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("connect loop across the agent's recreation: %d connects, %v, errors %v", o.r.Attempts, o.r.Replies, o.r.Errors)
	if o.r.TotalErrors() != 0 || o.r.Attempts < 1000 {
		t.Errorf("want 1000+ connects and 0 failed: %+v", o.r)
	}
	if err := n.CheckHooks(true); err != nil {
		t.Error(err)
	}
}

// TestKubectlPlugin: kubectl socklb, run as an operator runs it (the
// node's admin kubeconfig), execs socklb in the DaemonSet's pod through
// pods/exec: inspect prints one Service's chain from the node's pins, and
// status reports the node's agent healthy with every frontend programmed.
func TestKubectlPlugin(t *testing.T) {
	needSocklb(t)
	e := newEcho(t, 2)
	e.waitServing()
	bin := filepath.Join(t.TempDir(), "kubectl-socklb")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-socklb")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-socklb: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{"--kubeconfig", n.CP.AdminKubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("inspect", "--node", nodeName(t, 0), e.ns+"/echo")
	if err != nil {
		t.Fatalf("kubectl socklb inspect %s/echo: %v\n%s", e.ns, err, out)
	}
	for _, w := range []string{e.clusterIP + ":80/TCP", e.clusterIP + ":53/UDP", e.ns + "/echo:tcp"} {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl socklb inspect lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "default/kubernetes") {
		t.Errorf("kubectl socklb inspect %s/echo shows other Services:\n%s", e.ns, out)
	}
	out, err = run("status")
	if err != nil || !strings.Contains(out, " OK ") {
		t.Errorf("kubectl socklb status: %v\n%s", err, out)
	}
	for _, p := range n.Nodes {
		if !strings.Contains(out, p.Spec.Name) {
			t.Errorf("kubectl socklb status lacks node %s:\n%s", p.Spec.Name, out)
		}
	}
	t.Logf("kubectl socklb status:\n%s", out)
}
