package healthcheck

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/servicemap"
)

// freePort finds a port free on 127.0.0.1 now; the tests bind loopback only.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, port uint16) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String() + "/any/path")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// kubeProxyBody is what kube-proxy v1.37's hcHandler writes
// (pkg/proxy/healthcheck/service_health.go, its dedented template).
func kubeProxyBody(ns, name string, count int, healthy bool) string {
	hb := "false"
	if healthy {
		hb = "true"
	}
	return "{\n\t\"service\": {\n\t\t\"namespace\": \"" + ns + "\",\n\t\t\"name\": \"" + name + "\"\n\t},\n\t\"localEndpoints\": " +
		string(rune('0'+count)) + ",\n\t\"serviceProxyHealthy\": " + hb + "\n}"
}

func TestServerAnswersAsKubeProxy(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	s := &Server{Healthy: healthy.Load, Log: slog.New(slog.DiscardHandler)}
	t.Cleanup(s.Close)
	svc := types.NamespacedName{Namespace: "default", Name: "web"}
	port := freePort(t)
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	sync := func(n int) {
		s.Sync([]servicemap.HealthCheck{{Service: svc, Port: port, Addrs: loop, LocalEndpoints: n}})
	}

	sync(2)
	code, h, body := get(t, port)
	if code != 200 || body != kubeProxyBody("default", "web", 2, true) {
		t.Errorf("2 local endpoints: %d %q, want 200 and kube-proxy's body", code, body)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff", "X-Load-Balancing-Endpoint-Weight": "2"} {
		if h.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, h.Get(k), v)
		}
	}

	sync(0)
	if code, h, body = get(t, port); code != 503 || body != kubeProxyBody("default", "web", 0, true) || h.Get("X-Load-Balancing-Endpoint-Weight") != "0" {
		t.Errorf("no local endpoint: %d %q weight %q, want 503", code, body, h.Get("X-Load-Balancing-Endpoint-Weight"))
	}

	sync(1)
	healthy.Store(false)
	if code, _, body = get(t, port); code != 503 || body != kubeProxyBody("default", "web", 1, false) {
		t.Errorf("proxy unhealthy: %d %q, want 503 with serviceProxyHealthy false", code, body)
	}
	healthy.Store(true)

	// A new port: the old one closes, the new one answers.
	port2 := freePort(t)
	s.Sync([]servicemap.HealthCheck{{Service: svc, Port: port2, Addrs: loop, LocalEndpoints: 1}})
	if code, _, _ = get(t, port2); code != 200 {
		t.Errorf("moved to port %d: %d, want 200", port2, code)
	}
	if c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(loop[0], port).String(), time.Second); err == nil {
		c.Close()
		t.Errorf("old port %d still open after the Service moved", port)
	}

	// Gone from the desired state: closed.
	s.Sync(nil)
	if c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(loop[0], port2).String(), time.Second); err == nil {
		c.Close()
		t.Errorf("port %d still open after the health check was removed", port2)
	}
}

// TestServerRetriesATakenPort: a port someone else holds (kube-proxy,
// beside socklb) is logged once, and tried again at every Sync.
func TestServerRetriesATakenPort(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{Healthy: func() bool { return true }, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	t.Cleanup(s.Close)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	hc := []servicemap.HealthCheck{{Service: types.NamespacedName{Namespace: "default", Name: "web"}, Port: port,
		Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, LocalEndpoints: 1}}
	s.Sync(hc)
	s.Sync(hc)
	s.Sync(hc)
	if n := strings.Count(logs.String(), "health check not served"); n != 1 {
		t.Errorf("taken port logged %d times over 3 syncs, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"service":{"name":"web","namespace":"default"}`) {
		t.Errorf("the log does not name the Service:\n%s", logs.String())
	}
	ln.Close()
	s.Sync(hc)
	if code, _, _ := get(t, port); code != 200 {
		t.Errorf("after the port was freed: %d, want 200", code)
	}
}
