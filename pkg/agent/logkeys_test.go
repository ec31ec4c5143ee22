package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
)

// TestLogKeys: the lines about a Service, a frontend and a map name them
// under the keys kube-proxy's lines use ("service" as klog.KObj writes it
// in JSON) and socklb's own ("frontend", "map"): a problem a build finds,
// and a sync's frontend that could not be programmed.
func TestLogKeys(t *testing.T) {
	h := startAgent(t)
	h.dp.setFail("web", true)
	h.src.set(func(in *model.Input) {
		in.Services = []*corev1.Service{service("bad", "not-an-ip"), service("web", "10.96.0.10")}
	})
	h.waitApply()
	h.settle()

	problem := h.logs.lines(t, "skipping unusable input")
	if len(problem) != 1 {
		t.Fatalf("%d problem lines, want 1: %v", len(problem), problem)
	}
	wantRef(t, problem[0], "service", "default", "bad")

	failed := h.logs.lines(t, "frontend not programmed; the rest of the node is")
	if len(failed) != 1 {
		t.Fatalf("%d lines for the failed frontend, want 1: %v", len(failed), failed)
	}
	l := failed[0]
	wantRef(t, l, "service", "default", "web")
	if l["frontend"] != "10.96.0.10:80/TCP" {
		t.Errorf(`"frontend" is %v, want "10.96.0.10:80/TCP": %v`, l["frontend"], l)
	}
	if l["map"] != "services" {
		t.Errorf(`"map" is %v, want "services": %v`, l["map"], l)
	}
}

// wantRef checks key holds an object reference as klog.KObj writes it in
// JSON: {"name": ..., "namespace": ...}.
func wantRef(t *testing.T, line map[string]any, key, ns, name string) {
	t.Helper()
	ref, ok := line[key].(map[string]any)
	if !ok || ref["namespace"] != ns || ref["name"] != name {
		t.Errorf("%q is %v, want {name: %s, namespace: %s}: %v", key, line[key], name, ns, line)
	}
}
