// Package healthcheck serves kube-proxy's per-Service health checks: for a
// LoadBalancer Service with externalTrafficPolicy Local, HTTP on its
// healthCheckNodePort answering 200 when this node has a ready endpoint of
// it and 503 otherwise, so the cloud load balancer sends external traffic
// only to nodes that can serve it locally. It needs no source address,
// so a socket-level proxy can serve it exactly as kube-proxy does
// (pkg/proxy/healthcheck/service_health.go): same listeners, status codes,
// headers and JSON body. What to serve comes from servicemap.HealthChecks.
package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/logkey"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Server keeps one HTTP server per (Service, IP family) that needs one.
// The zero value is not usable: set Healthy and Log.
type Server struct {
	// Healthy is the proxy's own health (kube-proxy's ProxyHealthServer
	// Health().Healthy, agent.Health.ProxyHealthy): while false every
	// check answers 503, so load balancers leave a node whose rules are
	// stale, failed syncs included.
	Healthy func() bool
	Log     *slog.Logger

	mu        sync.Mutex
	instances map[key]*instance
	failed    map[key]string // last listen error, logged once per change
}

type key struct {
	svc  types.NamespacedName
	ipv6 bool
}

type instance struct {
	port    uint16
	addrs   []netip.Addr
	servers []*http.Server
	lns     []net.Listener

	mu        sync.Mutex
	endpoints int
}

// Sync makes the listeners match checks: new ones are opened, gone ones
// closed, ones whose port or addresses changed reopened, and every
// count updated. A listener that cannot be opened (the port is taken) is
// logged naming the Service (once until the error changes) and tried again
// at the next Sync, as kube-proxy does at each of its syncs.
func (s *Server) Sync(checks []servicemap.HealthCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.instances == nil {
		s.instances = map[key]*instance{}
	}
	failed := map[key]string{}
	defer func() { s.failed = failed }()
	want := make(map[key]servicemap.HealthCheck, len(checks))
	for _, hc := range checks {
		want[key{hc.Service, hc.IPv6}] = hc
	}
	for k, inst := range s.instances {
		hc, ok := want[k]
		if !ok || hc.Port != inst.port || !slices.Equal(hc.Addrs, inst.addrs) {
			inst.close()
			delete(s.instances, k)
			s.Log.Info("closed health check", logkey.Service(k.svc), "port", inst.port)
		}
	}
	for k, hc := range want {
		inst := s.instances[k]
		if inst == nil {
			var err error
			if inst, err = s.open(k, hc); err != nil {
				// Beside kube-proxy the port is kube-proxy's, which answers
				// the same: say so once, not at every sync.
				failed[k] = err.Error()
				if s.failed[k] != err.Error() {
					s.Log.Error("health check not served: another process (kube-proxy, if it runs beside socklb) holds the port, or the address is gone; retrying at every sync",
						logkey.Service(k.svc), "port", hc.Port, "err", err)
				}
				continue
			}
			s.instances[k] = inst
			s.Log.Info("serving health check", logkey.Service(k.svc), "port", hc.Port, "addrs", fmt.Sprint(hc.Addrs))
		}
		inst.mu.Lock()
		inst.endpoints = hc.LocalEndpoints
		inst.mu.Unlock()
	}
}

// Close stops every listener.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, inst := range s.instances {
		inst.close()
		delete(s.instances, k)
	}
}

// open listens on every address of hc, or on none: kube-proxy closes what
// it opened when one address fails, so a retry starts clean.
func (s *Server) open(k key, hc servicemap.HealthCheck) (*instance, error) {
	inst := &instance{port: hc.Port, addrs: slices.Clone(hc.Addrs)}
	network := "tcp4"
	if k.ipv6 {
		network = "tcp6" // Go sets IPV6_V6ONLY: the IPv4 server binds the same port
	}
	for _, a := range hc.Addrs {
		ln, err := net.Listen(network, netip.AddrPortFrom(a, hc.Port).String())
		if err != nil {
			inst.close()
			return nil, err
		}
		srv := &http.Server{Handler: handler{svc: k.svc, inst: inst, healthy: s.Healthy}, ReadHeaderTimeout: 5 * time.Second}
		inst.servers = append(inst.servers, srv)
		inst.lns = append(inst.lns, ln)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.Log.Error("health check server stopped", logkey.Service(k.svc), "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	return inst, nil
}

// close shuts the servers down and closes the listeners itself: a Serve
// goroutine that has not started yet would otherwise leave its port bound
// for a moment, and a reopen on the same port would fail.
func (inst *instance) close() {
	for _, srv := range inst.servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	for _, ln := range inst.lns {
		_ = ln.Close()
	}
}

type handler struct {
	svc     types.NamespacedName
	inst    *instance
	healthy func() bool
}

// ServeHTTP answers as kube-proxy's hcHandler, byte for byte: any method
// and path, the local endpoint count in X-Load-Balancing-Endpoint-Weight,
// and the JSON body its dedented template produces (tab-indented, no
// trailing newline).
func (h handler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.inst.mu.Lock()
	count := h.inst.endpoints
	h.inst.mu.Unlock()
	healthy := h.healthy == nil || h.healthy()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		h.svc.Namespace, h.svc.Name, count, healthy)
}
