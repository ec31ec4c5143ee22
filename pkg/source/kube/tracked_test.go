package kube

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/source"
)

// TestCheckoutNamesTheTouchedServices: each informer event dirties the
// Service it belongs to, a relabelled slice both its old and its new
// Service, a Node event the node; ServiceObjects reads one Service and its
// slices; trigger times come from added and updated slices only.
func TestCheckoutNamesTheTouchedServices(t *testing.T) {
	client, watching := newClient(service("a", nil, 80), service("b", nil, 80), slice("a-1", "a"), node("n1"))
	s, err := New(client, Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	calls := run(t, s, nil)
	await(t, calls, "the first changed()")
	for range 3 {
		await(t, watching, "the watches")
	}
	s.Checkout()
	ctx := context.Background()
	nn := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: name} }
	// checkoutWhen polls until the pending counts say the events arrived.
	checkoutWhen := func(what string, svcs, sls int) source.Changes {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if a, b := s.Pending(); a >= svcs && b >= sls {
				return s.Checkout()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: pending never reached %d services, %d slices", what, svcs, sls)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	moved := slice("a-1", "b")
	trigger := time.Now().Add(time.Second).UTC().Truncate(time.Millisecond)
	moved.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch := checkoutWhen("relabelled slice", 0, 1)
	if got := slices.SortedFunc(maps.Keys(ch.Services), cmpNN); !slices.Equal(got, []types.NamespacedName{nn("a"), nn("b")}) {
		t.Errorf("a slice moved from a to b dirtied %v, want both", got)
	}
	if ts := ch.Triggers[nn("b")]; len(ts) != 1 || !ts[0].Equal(trigger) || len(ch.Triggers[nn("a")]) != 0 {
		t.Errorf("triggers %v, want %v for b only", ch.Triggers, trigger)
	}
	if ch.Node || ch.SliceObjects != 1 || ch.ServiceObjects != 0 {
		t.Errorf("checkout %+v: want 1 slice object, no Service, no node", ch)
	}
	if o := s.ServiceObjects(nn("b")); o.Service == nil || len(o.Slices) != 1 || o.Slices[0].Name != "a-1" {
		t.Errorf("ServiceObjects(b) = %+v, want Service b with slice a-1", o)
	}
	if o := s.ServiceObjects(nn("a")); o.Service == nil || len(o.Slices) != 0 {
		t.Errorf("ServiceObjects(a) = %+v, want Service a without slices", o)
	}

	if err := client.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ch = checkoutWhen("deleted Service", 1, 0)
	if !ch.Services[nn("a")] || len(ch.Services) != 1 {
		t.Errorf("deleting Service a dirtied %v", ch.Services)
	}
	if o := s.ServiceObjects(nn("a")); o.Service != nil {
		t.Errorf("ServiceObjects of a deleted Service = %+v", o)
	}

	if _, err := client.CoreV1().Nodes().Update(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"x": "y"}}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !ch.Node && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		ch = s.Checkout()
	}
	if !ch.Node || len(ch.Services) != 0 {
		t.Errorf("a Node update: checkout %+v, want the node alone", ch)
	}
}

func cmpNN(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		return cmpString(a.Namespace, b.Namespace)
	}
	return cmpString(a.Name, b.Name)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
