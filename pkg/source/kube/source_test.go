package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
)

func service(name string, labels map[string]string, ports ...int32) *corev1.Service {
	s := testkit.Service(name, "10.96.0.10")
	s.Labels = labels
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, testkit.ServicePort("", corev1.ProtocolTCP, p))
	}
	return s
}

func slice(name, svc string) *discoveryv1.EndpointSlice {
	return testkit.EndpointSlice(name, svc, discoveryv1.AddressTypeIPv4, nil, testkit.Endpoint("10.244.1.11", nil, nil, nil))
}

func node(name string) *corev1.Node { return testkit.Node(name, "") }

// newClient is a fake clientset that tells when the informers' watches are
// established: the fake ignores resource versions, so anything written
// between an informer's list and its watch would be lost.
func newClient(objs ...runtime.Object) (*fake.Clientset, <-chan string) {
	client := fake.NewClientset(objs...)
	watching := make(chan string, 10)
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		watching <- action.GetResource().Resource
		return true, w, nil
	})
	return client, watching
}

// run starts s and returns a channel with one value per changed() call.
// Each call first runs hook (if any), standing in for an agent at work.
func run(t *testing.T, s *Source, hook func()) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 1000)
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func() {
			if hook != nil {
				hook()
			}
			calls <- struct{}{}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return calls
}

func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

// changedTo waits for changed() calls until one leaves a snapshot that
// satisfies ok. Informers poke after updating their cache, so a change is
// visible by the call that follows it. Drain calls before making the change.
func changedTo(t *testing.T, s *Source, calls <-chan struct{}, what string, ok func(model.Input) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-calls:
			if ok(s.Snapshot()) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for changed() with %s; snapshot: %s", what, describe(s.Snapshot()))
		}
	}
}

// drain forgets changed() calls made so far.
func drain(calls <-chan struct{}) {
	for {
		select {
		case <-calls:
		default:
			return
		}
	}
}

func describe(in model.Input) string {
	var parts []string
	for _, s := range in.Services {
		parts = append(parts, fmt.Sprintf("svc %s/%s ports %d", s.Namespace, s.Name, len(s.Spec.Ports)))
	}
	for _, s := range in.Slices {
		parts = append(parts, "slice "+s.Namespace+"/"+s.Name)
	}
	for _, n := range in.Nodes {
		parts = append(parts, "node "+n.Name)
	}
	return strings.Join(parts, ", ")
}

func TestSourceFollowsObjects(t *testing.T) {
	client, watching := newClient(
		service("echo", nil, 80),
		service("other-proxy", map[string]string{model.LabelServiceProxyName: "someone-else"}, 80),
		slice("echo-1", "echo"),
		node("n1"), node("n2"),
	)
	s, err := New(client, Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	calls := run(t, s, nil)
	await(t, calls, "the first changed()")
	if got, want := describe(s.Snapshot()), "svc default/echo ports 1, slice default/echo-1, node n1, node n2"; got != want {
		t.Fatalf("first snapshot = %q, want %q", got, want)
	}
	if s.Snapshot().NodeName != "n1" {
		t.Error("NodeName not filled")
	}
	var started []string
	for range 3 {
		started = append(started, await(t, watching, "the watches"))
	}
	slices.Sort(started)
	if !slices.Equal(started, []string{"endpointslices", "nodes", "services"}) {
		t.Fatalf("watches started: %v", started)
	}

	ctx := context.Background()
	drain(calls)
	if _, err := client.CoreV1().Services("default").Update(ctx, service("echo", nil, 80, 443), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changedTo(t, s, calls, "the updated Service", func(in model.Input) bool {
		return len(in.Services) == 1 && len(in.Services[0].Spec.Ports) == 2
	})

	drain(calls)
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice("echo-2", "echo"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changedTo(t, s, calls, "the new EndpointSlice", func(in model.Input) bool { return len(in.Slices) == 2 })

	drain(calls)
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "echo-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changedTo(t, s, calls, "the deleted EndpointSlice", func(in model.Input) bool {
		return len(in.Slices) == 1 && in.Slices[0].Name == "echo-2"
	})

	drain(calls)
	if err := client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changedTo(t, s, calls, "the deleted Node", func(in model.Input) bool { return len(in.Nodes) == 1 && in.ThisNode() == nil })

	drain(calls)
	if err := client.CoreV1().Services("default").Delete(ctx, "echo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changedTo(t, s, calls, "the deleted Service", func(in model.Input) bool { return len(in.Services) == 0 })
}

// A burst of events while the agent is busy must not queue one rebuild per
// event: the agent blocks in its second changed() while the burst arrives,
// and afterwards at most one more call is pending.
func TestSourceCoalescesBursts(t *testing.T) {
	client, watching := newClient()
	s, err := New(client, Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	busy, release := make(chan struct{}), make(chan struct{})
	calls := run(t, s, func() {
		if n.Add(1) == 2 {
			close(busy)
			<-release
		}
	})
	await(t, calls, "the first changed()")
	for range 3 {
		await(t, watching, "the watches")
	}
	const events = 100
	for i := range events {
		if _, err := client.DiscoveryV1().EndpointSlices("default").Create(context.Background(), slice(fmt.Sprintf("s-%d", i), "echo"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	await(t, busy, "changed() after the burst")
	for deadline := time.Now().Add(5 * time.Second); len(s.Snapshot().Slices) < events; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d EndpointSlices seen", len(s.Snapshot().Slices), events)
		}
	}
	close(release)
	// Handlers may still be delivering the last events: give them time.
	time.Sleep(200 * time.Millisecond)
	if got := n.Load(); got > 4 {
		t.Errorf("%d events caused %d changed() calls after the first", events, got-1)
	}
	t.Logf("%d events caused %d changed() calls after the first", events, n.Load()-1)
}

func TestSourceReportsListFailures(t *testing.T) {
	client, _ := newClient()
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", fmt.Errorf("RBAC says no"))
	})
	var mu sync.Mutex
	var got []model.Problem
	reported := make(chan struct{}, 100)
	s, err := New(client, Config{NodeName: "n1", Report: func(p model.Problem) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		reported <- struct{}{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	calls := run(t, s, nil)
	await(t, reported, "a reported problem")
	mu.Lock()
	p := got[0]
	mu.Unlock()
	if p.Kind != "Watch" || p.Object.Name != "services" || !strings.Contains(p.Reason, "RBAC says no") {
		t.Errorf("problem = %v", p)
	}
	select {
	case <-calls:
		t.Error("changed() called although the Services cache cannot sync")
	default:
	}
}

func TestNewNeedsNodeName(t *testing.T) {
	if _, err := New(fake.NewClientset(), Config{}); err == nil {
		t.Error("no error without a node name")
	}
}
