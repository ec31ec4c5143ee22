package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestHealthCheckNodePort: a LoadBalancer Service with
// externalTrafficPolicy Local gets kube-proxy's health check server on its
// healthCheckNodePort (pkg/proxy/healthcheck/service_health.go): 200 with
// the local endpoint count while this node has a ready endpoint, 503 when
// its only local endpoints are remote or terminating, and the port closes
// with the Service. --nodeport-addresses localhost keeps the listener on
// 127.0.0.1 (kube-proxy listens on the interface addresses inside the
// filter), so nothing is exposed beyond this machine.
func TestHealthCheckNodePort(t *testing.T) {
	port := freePortBelowEphemeral(t)
	lb := svcSpec{name: "lb", clusterIPs: []string{vip}, typ: "LoadBalancer", nodePort: 30080, etp: "Local", hcNodePort: port}
	e := startWith(t, threePods, map[string]string{
		"lb.yaml": lb.yaml(readyEP("10.244.1.11", "node-a"), readyEP("10.244.1.12", "node-a"), readyEP("10.244.1.13", "node-b")),
	}, "--nodeport-addresses", "localhost")
	e.waitInspect(10*time.Second, "10.244.1.13:8080")
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)

	want := func(what string, code int, body string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			gotCode, gotBody, h, err := httpGet(url)
			if err == nil && gotCode == code && gotBody == body && h.Get("Content-Type") == "application/json" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET %s = %d %q (headers %v, err %v), want %d %q", what, url, gotCode, gotBody, h, err, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	body := func(n int) string {
		return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"lb\"\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": true\n}", n)
	}
	want("two ready endpoints here", 200, body(2))

	e.writeManifest("lb.yaml", lb.yaml(readyEP("10.244.1.13", "node-b"),
		ep{ip: "10.244.1.11", node: "node-a", serving: true, terminating: true}))
	want("local endpoint terminating, the ready one remote", 503, body(0))

	e.writeManifest("lb.yaml", "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("healthCheckNodePort %d still open after the Service was removed", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpGet(url string) (int, string, http.Header, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

// freePortBelowEphemeral returns a free 127.0.0.1 TCP port under the
// kernel's ephemeral range (32768 and up by default). A port taken with
// :0 and closed again is ephemeral: the agent's own listeners on :0 (its
// /healthz, its metrics) may be given the same number before the test's
// Service claims it, and then answer in its place.
func freePortBelowEphemeral(t *testing.T) int {
	t.Helper()
	for p := 20000 + os.Getpid()%5000; p < 32000; p += 7 {
		ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("no free TCP port on 127.0.0.1 between 20000 and 32000")
	return 0
}
