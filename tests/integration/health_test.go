package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// healthCode fetches path (/healthz or /livez) from the agent's health
// address, as it logged it.
func (e *env) healthCode(path string) int {
	e.t.Helper()
	addr, err := e.current().LoggedAddr("health", 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	code, _, err := testkit.Get(addr, path)
	if err != nil {
		e.t.Fatal(err)
	}
	return code
}

// TestFullMapIsReadinessNotLiveness: a frontend that never fits keeps every
// sync failing. That must not fail /livez (the kubelet would restart the
// agent every minute, and the new one would fail the same way), only
// /healthz, the readiness signal, as kube-proxy's when it cannot program.
// The Service is the API server's, which is never refused for room (a
// tenant's would be, and the node would stay ready): a node that cannot
// serve it cannot serve the cluster.
func TestFullMapIsReadinessNotLiveness(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"kubernetes.yaml": svcSpec{name: "kubernetes", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
	}, "--max-backends", "1", "--map-memory-budget", "0", "--healthz-timeout", "1s")
	deadline := time.Now().Add(10 * time.Second)
	for e.healthCode("/healthz") != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never turned 503 while a frontend cannot be programmed:\n%s", e.agentLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Well past the timeout, through several retries.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if c := e.healthCode("/livez"); c != http.StatusOK {
			t.Fatalf("/livez %d while the sync loop runs and only programming fails: the kubelet would restart the agent in a loop", c)
		}
	}
	if c := e.healthCode("/healthz"); c != http.StatusServiceUnavailable {
		t.Errorf("/healthz %d, want 503 while frontends stay unprogrammed", c)
	}
}
