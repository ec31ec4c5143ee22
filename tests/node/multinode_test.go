//go:build node

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/socklb/socklb/tests/labclient/wire"
	"github.com/socklb/socklb/tests/node"
)

// socklb's own multi-node tests. They check behaviour, not socklb's
// internals, so they run under either proxy: under kube-proxy (the
// control, `-proxy=kube-proxy -run 'Test(RemoteOnly|.*TrafficPolicyLocal)'`)
// they show that the expectation is kube-proxy's.

// TestRemoteOnlyEndpoint: a pod reaches a Service whose only endpoint is
// on another node: every connect answers, from that endpoint.
func TestRemoteOnlyEndpoint(t *testing.T) {
	e := newEchoWith(t, nodeName(t, 1), nodeName(t, 0), 1, nil)
	e.waitServing()
	r, err := e.client(context.Background(), "tcp", "--addr", e.clusterIP+":80", "--count", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 connects from %s to %s:80 (endpoint on %s): %v, errors %v", nodeName(t, 1), e.clusterIP, nodeName(t, 0), r.Replies, r.Errors)
	if r.OK != 100 || r.Replies["echo-0"] != 100 {
		t.Errorf("want 100 answers from echo-0 on the other node: %+v", r)
	}
}

// twoNodeEcho is an echo Service with echo-0 on the first node and echo-1
// on the second, the client on the first.
func twoNodeEcho(t *testing.T, change func(*corev1.Service)) *echo {
	t.Helper()
	e := newEchoWith(t, nodeName(t, 0), nodeName(t, 0), 1, change)
	e.backendNode = nodeName(t, 1)
	e.addBackend("echo-1")
	return e
}

// deleteDraining deletes a backend pod, which keeps serving for 30 s
// (preStop): its endpoint is serving and terminating.
func (e *echo) deleteDraining(name string) {
	e.t.Helper()
	ctx := context.Background()
	if err := n.CP.Admin.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	waitFor(e.t, name+"'s endpoint terminating", 20*time.Second, func() error {
		l, err := n.CP.Admin.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=echo"})
		if err != nil {
			return err
		}
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil && ep.TargetRef.Name == name && ptr.Deref(ep.Conditions.Terminating, false) && ptr.Deref(ep.Conditions.Serving, false) {
					return nil
				}
			}
		}
		return fmt.Errorf("no serving, terminating endpoint for %s yet", name)
	})
	// The proxies' programming is not instant.
	time.Sleep(3 * time.Second)
}

// only checks that every one of want connects answered, all from backend.
func only(t *testing.T, what string, r *wire.Result, want int, backend string) {
	t.Helper()
	t.Logf("%s: %v, errors %v", what, r.Replies, r.Errors)
	if r.OK != want || r.Replies[backend] != want {
		t.Errorf("%s: want %d answers, all from %s: %+v", what, want, backend, r)
	}
}

// TestInternalTrafficPolicyLocal: with internalTrafficPolicy Local a pod
// reaches only its own node's endpoint; when that one terminates (and
// still serves), it keeps reaching it and never the other node's ready
// one, as kube-proxy does (KEP-1669: no ready local endpoint, so the
// serving terminating local ones).
func TestInternalTrafficPolicyLocal(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	e := twoNodeEcho(t, func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = &local })
	ctx := context.Background()
	waitFor(t, "echo-0 to answer", time.Minute, func() error {
		r, err := e.client(ctx, "tcp", "--addr", e.clusterIP+":80", "--count", "5")
		if err != nil {
			return err
		}
		if r.Replies["echo-0"] != 5 {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	r, err := e.client(ctx, "tcp", "--addr", e.clusterIP+":80", "--count", "50")
	if err != nil {
		t.Fatal(err)
	}
	only(t, "50 connects with internalTrafficPolicy Local", r, 50, "echo-0")
	e.deleteDraining("echo-0")
	r, err = e.client(ctx, "tcp", "--addr", e.clusterIP+":80", "--count", "50")
	if err != nil {
		t.Fatal(err)
	}
	only(t, "50 connects with the local endpoint terminating", r, 50, "echo-0")
}

// outside runs labclient in the "outside" namespace: a client on another
// machine, with no proxy of its own.
func outside(ctx context.Context, args ...string) (*wire.Result, error) {
	bin := os.Getenv(labclientEnv)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", node.OutsideNetns, bin}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return nil, fmt.Errorf("labclient (outside) %v: %v: %s%s", args, err, out, msg)
	}
	var r wire.Result
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("labclient (outside) %v printed %q: %w", args, out, err)
	}
	return &r, nil
}

// TestExternalTrafficPolicyLocal: a NodePort Service with
// externalTrafficPolicy Local, one endpoint on each of two nodes. From
// outside, each node's NodePort reaches only that node's endpoint; a node
// without one answers nothing. When the first node's endpoint terminates
// (still serving), its NodePort keeps reaching it, not the other node's,
// as kube-proxy does. Packets from another machine: needs socklb's tc
// path (issue #20) on the nodes' underlay interfaces.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	e := twoNodeEcho(t, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	svc, err := n.CP.Admin.CoreV1().Services(e.ns).Get(context.Background(), "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP {
			port = p.NodePort
		}
	}
	ctx := context.Background()
	addr := func(i int) string { return fmt.Sprintf("%s:%d", n.Nodes[i].Spec.IP, port) }
	waitFor(t, "both NodePorts to answer from outside", time.Minute, func() error {
		for i, b := range []string{"echo-0", "echo-1"} {
			r, err := outside(ctx, "tcp", "--addr", addr(i), "--count", "5", "--timeout", "2s")
			if err != nil {
				return err
			}
			if r.Replies[b] != 5 {
				return fmt.Errorf("%s: %+v", addr(i), r)
			}
		}
		return nil
	})
	for i, b := range []string{"echo-0", "echo-1"} {
		r, err := outside(ctx, "tcp", "--addr", addr(i), "--count", "30", "--timeout", "2s")
		if err != nil {
			t.Fatal(err)
		}
		only(t, "30 connects from outside to "+addr(i), r, 30, b)
	}
	if len(n.Nodes) > 2 {
		r, err := outside(ctx, "tcp", "--addr", addr(2), "--count", "3", "--timeout", "2s")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("3 connects from outside to %s (no endpoint there): %v, errors %v", addr(2), r.Replies, r.Errors)
		if r.OK != 0 {
			t.Errorf("the node without an endpoint answered: %+v", r)
		}
	}
	e.deleteDraining("echo-0")
	r, err := outside(ctx, "tcp", "--addr", addr(0), "--count", "30", "--timeout", "2s")
	if err != nil {
		t.Fatal(err)
	}
	only(t, "30 connects from outside to "+addr(0)+" with its endpoint terminating", r, 30, "echo-0")
}
