package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type healthBody struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible"`
	Healthy      bool      `json:"healthy"`
}

func (e *env) health(path string) (int, healthBody) {
	e.t.Helper()
	code, body, err := e.get(e.healthz, path)
	if err != nil {
		e.t.Fatal(err)
	}
	var h healthBody
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		e.t.Fatalf("%s: body %q: %v", path, body, err)
	}
	return code, h
}

// waitHealth polls path until it answers code with nodeEligible as given
// (nil: not present, as on /livez).
func (e *env) waitHealth(path string, code int, eligible *bool) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, h := e.health(path)
		if c == code && fmt.Sprint(deref(h.NodeEligible)) == fmt.Sprint(deref(eligible)) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s answers %d %+v, want %d nodeEligible %v", path, c, h, code, deref(eligible))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// TestHealthzFollowsNode: /healthz and /livez on the agent's health port,
// with kube-proxy's semantics, driven by the real Node object: the Cluster
// Autoscaler's ToBeDeletedByClusterAutoscaler taint fails /healthz (load
// balancers drain the node) but not /livez (the agent is not restarted).
func TestHealthzFollowsNode(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	yes, no := true, false
	e.waitHealth("/healthz", 200, &yes)
	e.waitHealth("/livez", 200, nil)
	if _, h := e.health("/healthz"); !h.Healthy || time.Since(h.CurrentTime) > time.Minute || h.LastUpdated.IsZero() {
		t.Errorf("healthy /healthz body %+v", h)
	}

	nodes := cp.Admin.CoreV1().Nodes()
	taint := func(add bool) {
		t.Helper()
		n, err := nodes.Get(e.ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var taints []corev1.Taint
		for _, tt := range n.Spec.Taints {
			if tt.Key != "ToBeDeletedByClusterAutoscaler" {
				taints = append(taints, tt)
			}
		}
		if add {
			taints = append(taints, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: fmt.Sprint(time.Now().Unix()), Effect: corev1.TaintEffectNoSchedule})
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
		if _, err := nodes.Patch(e.ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { taint(false) })

	taint(true)
	e.waitHealth("/healthz", 503, &no)
	e.waitHealth("/livez", 200, nil)
	taint(false)
	e.waitHealth("/healthz", 200, &yes)

	if n, ok := e.metric(`socklb_proxy_healthz_total{code="503"}`); !ok || n < 1 {
		t.Errorf(`socklb_proxy_healthz_total{code="503"} = %v (found %v), want >= 1`, n, ok)
	}
	if n, ok := e.metric(`socklb_proxy_livez_total{code="200"}`); !ok || n < 1 {
		t.Errorf(`socklb_proxy_livez_total{code="200"} = %v (found %v), want >= 1`, n, ok)
	}
}
