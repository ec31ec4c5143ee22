package e2e

import (
	"net/http"
	"os"
	"testing"
	"time"
)

// outage is how long the API server stays down: 60 s, long enough for
// client-go's reflector backoff (0.8 s, doubling, capped at 30 s) to reach
// its cap, so the agent rides out many failed relists; shorter with
// SOCKLB_E2E_OUTAGE=10s for a quick local run.
func outage() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SOCKLB_E2E_OUTAGE")); err == nil && d > 0 {
		return d
	}
	return 60 * time.Second
}

// TestAPIServerOutage: with kube-apiserver stopped the datapath keeps
// serving the last state without a single failed connect, /healthz stays
// 200 (nothing is queued, as in kube-proxy), and once the API server is
// back a change made through it reaches the maps.
func TestAPIServerOutage(t *testing.T) {
	e := newEnv(t, threePods...)
	e.startAgent()
	svc, at := e.createService("echo", "echo")
	vip := svc.Spec.ClusterIP
	tcpKey := vip + ":80/TCP"
	e.createPod("echo-1", "echo", "10.244.1.11", true)
	at = e.createPod("echo-2", "echo", "10.244.1.12", true)
	e.waitBackends("before the outage", tcpKey, []string{backend("10.244.1.11"), backend("10.244.1.12")}, at)

	down := outage()
	cp.StopAPIServer()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := cp.StartAPIServer(); err != nil {
				t.Errorf("restarting kube-apiserver: %v", err)
			}
		}
	})
	stopped := time.Now()
	res, err := e.lab.Client("").Loop(e.ctx, e.cg, vip+":80", down)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API server down %s: %d connects, errors %v", time.Since(stopped).Round(time.Second), res.OK, res.Errors)
	if res.TotalErrors() != 0 || res.OK == 0 {
		t.Fatalf("the datapath did not keep serving during the outage: %d ok, errors %v (%s)", res.OK, res.Errors, res.FirstError)
	}
	if code, body := e.health("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during an outage with nothing queued = %d %+v, want 200 (kube-proxy's semantics)", code, body)
	}

	if err := cp.StartAPIServer(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	restarted = true
	e.apiRestarted = true
	back := time.Now()
	// A change that needs only the API server and the agent's watch (no
	// controller): the Service goes away.
	gone := e.deleteService("echo")
	for {
		_, present, err := e.backendsOf(tcpKey)
		if err != nil {
			t.Fatal(err)
		}
		if !present {
			break
		}
		// The backoff is jittered up to twice its cap.
		if time.Since(gone) > 90*time.Second {
			t.Fatalf("the Service deleted after the outage is still programmed 90 s later")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// client-go retries a failed watch with exponential backoff capped at
	// 30 s, so the watch resumes up to 30 s after the API server returns;
	// the change is applied as soon as it does.
	t.Logf("change applied %s after the API server was ready again (%s after the write)",
		time.Since(back).Round(time.Millisecond), time.Since(gone).Round(time.Millisecond))
	if code, _ := e.health("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after the outage = %d, want 200", code)
	}
	// The controllers' informers are in the same backoff; the tests after
	// this one measure the agent, not kube-controller-manager's recovery.
	if err := cp.RestartControllers(); err != nil {
		t.Errorf("restarting kube-controller-manager: %v", err)
	}
}
