package kube

import (
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/socklb/socklb/pkg/model"
)

// TestSourceSelectsAsKubeProxy: the informers ask the API server for what
// kube-proxy v1.37's informers ask for (cmd/kube-proxy/app/server.go):
// Services by service-proxy-name and clusterIP != None, EndpointSlices by
// the headless label, each kind by its own label only.
func TestSourceSelectsAsKubeProxy(t *testing.T) {
	headlessLabelled := service("labelled-headless", map[string]string{corev1.IsHeadlessService: ""}, 80)
	sliceOfOther := slice("echo-other", "echo")
	sliceOfOther.Labels[model.LabelServiceProxyName] = "someone-else"
	headlessSlice := slice("echo-headless", "echo")
	headlessSlice.Labels[corev1.IsHeadlessService] = ""
	client, _ := newClient(
		service("echo", nil, 80),
		headlessLabelled,
		service("other-proxy", map[string]string{model.LabelServiceProxyName: "someone-else"}, 80),
		slice("echo-1", "echo"), sliceOfOther, headlessSlice,
		node("n1"),
	)
	var mu sync.Mutex
	asked := map[string]string{}
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		mu.Lock()
		asked[a.GetResource().Resource] = l.ListOptions.LabelSelector + " | " + l.ListOptions.FieldSelector
		mu.Unlock()
		return false, nil, nil
	})
	s, err := New(client, Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	await(t, run(t, s, nil), "the first changed()")

	mu.Lock()
	for res, want := range map[string]string{
		"services":       "!service.kubernetes.io/service-proxy-name | spec.clusterIP!=None",
		"endpointslices": "!service.kubernetes.io/headless | ",
	} {
		if asked[res] != want {
			t.Errorf("list %s with selectors %q, want kube-proxy's %q", res, asked[res], want)
		}
	}
	mu.Unlock()

	in := s.Snapshot()
	var svcs, eps []string
	for _, o := range in.Services {
		svcs = append(svcs, o.Name)
	}
	for _, o := range in.Slices {
		eps = append(eps, o.Name)
	}
	slices.Sort(svcs)
	slices.Sort(eps)
	if got, want := strings.Join(svcs, " "), "echo labelled-headless"; got != want {
		t.Errorf("Services %q, want %q: the headless label alone does not hide a Service with a cluster IP", got, want)
	}
	if got, want := strings.Join(eps, " "), "echo-1 echo-other"; got != want {
		t.Errorf("EndpointSlices %q, want %q: a slice's service-proxy-name label is not read, its headless label is", got, want)
	}
}
