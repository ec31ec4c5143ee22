package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The permissions deploy/base/rbac.yaml grants, and all that socklb needs.
// As "verb resource[.group]".
var wantRBAC = []string{
	"create events.events.k8s.io",
	"get endpointslices.discovery.k8s.io",
	"get nodes",
	"get services",
	"list endpointslices.discovery.k8s.io",
	"list nodes",
	"list services",
	"patch events.events.k8s.io",
	"watch endpointslices.discovery.k8s.io",
	"watch nodes",
	"watch services",
}

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// TestServiceAccountHasExactlyDeployRBAC asks the API server's authorizer,
// for every resource and subresource it serves and every verb, cluster-wide
// and in kube-system, what the DaemonSet's ServiceAccount may do beyond an
// unbound ServiceAccount of the same namespace (which holds the defaults
// every ServiceAccount gets, such as discovery). The difference must be
// exactly the rules of deploy/base/rbac.yaml. That they are enough is what every
// other test shows: their agent runs with this ServiceAccount's token.
func TestServiceAccountHasExactlyDeployRBAC(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	lists, err := cp.Admin.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		gr         schema.GroupResource
		sub        string
		verb       string
		namespace  string
		namespaced bool
	}
	var checks []check
	seen := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			res, sub, _ := strings.Cut(r.Name, "/")
			k := gv.Group + "/" + r.Name
			if seen[k] {
				continue
			}
			seen[k] = true
			for _, v := range allVerbs {
				checks = append(checks, check{gr: schema.GroupResource{Group: gv.Group, Resource: res}, sub: sub, verb: v, namespaced: r.Namespaced})
				if r.Namespaced {
					checks = append(checks, check{gr: schema.GroupResource{Group: gv.Group, Resource: res}, sub: sub, verb: v, namespace: saNamespace, namespaced: true})
				}
			}
		}
	}
	// Subresources the preferred list may not name but that matter here.
	for _, sub := range []string{"status", "proxy"} {
		for _, v := range allVerbs {
			checks = append(checks, check{gr: schema.GroupResource{Resource: "nodes"}, sub: sub, verb: v})
			checks = append(checks, check{gr: schema.GroupResource{Resource: "services"}, sub: sub, verb: v, namespace: saNamespace, namespaced: true})
		}
	}
	t.Logf("%d resources and subresources, %d access checks per ServiceAccount", len(seen), len(checks))

	allowed := func(user string) map[string]bool {
		out := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, c := range checks {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: c.namespace, Verb: c.verb, Group: c.gr.Group, Resource: c.gr.Resource, Subresource: c.sub,
					},
				}}
				r, err := cp.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status.Allowed {
					name := c.gr.String()
					if c.sub != "" {
						name += "/" + c.sub
					}
					mu.Lock()
					out[c.verb+" "+name] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return out
	}
	got := allowed("system:serviceaccount:" + saNamespace + ":" + saName)
	base := allowed("system:serviceaccount:" + saNamespace + ":e2e-unbound")
	var extra []string
	for k := range got {
		if !base[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	if !slices.Equal(extra, wantRBAC) {
		t.Errorf("the ServiceAccount may, beyond the defaults:\n  %s\nwant exactly:\n  %s", strings.Join(extra, "\n  "), strings.Join(wantRBAC, "\n  "))
	}

	// And with the token itself: reads work, anything else is forbidden.
	cfg, err := clientcmd.BuildConfigFromFlags("", agentKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list services: %v", err)
	}
	if _, err := sa.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list endpointslices: %v", err)
	}
	if _, err := sa.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Errorf("get node: %v", err)
	}
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"list pods", func() error { _, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }},
		{"list secrets", func() error { _, err := sa.CoreV1().Secrets(saNamespace).List(ctx, metav1.ListOptions{}); return err }},
		{"create services", func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}}}
			_, err := sa.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"patch nodes", func() error {
			_, err := sa.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"delete endpointslices", func() error {
			return sa.DiscoveryV1().EndpointSlices("default").DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ListOptions{})
		}},
	} {
		if err := c.do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s with the socklb token: %v, want Forbidden", c.what, err)
		}
	}
}
