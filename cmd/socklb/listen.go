package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/socklb/socklb/pkg/agent"
)

// checkBindAddress checks the form of a --*-bind-address, as kube-proxy
// validates its own: IP:port, where an empty host is every address and
// localhost is loopback (isLoopbackAddr), and port 0 lets the kernel pick
// one. Only a listen says whether the port is free (bindListeners).
func checkBindAddress(flag, addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q: want IP:port, e.g. 0.0.0.0:10256 or [::1]:10249 (empty disables the endpoint)", flag, addr)
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%s=%q: %q is not an IP address: want IP:port, e.g. 0.0.0.0:10256 or [::1]:10249", flag, addr, host)
		}
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s=%q: port %q is not a number from 0 to 65535", flag, addr, port)
	}
	return nil
}

// listeners are the agent's HTTP ports, bound by the preflight and held
// until their servers take them: bound before the datapath, so a taken
// port fails the start before anything is pinned, and held so that
// nothing takes the port meanwhile.
type listeners struct {
	healthz, metrics net.Listener // nil: disabled, or served already
}

// bindListeners binds --healthz-bind-address and --metrics-bind-address,
// or neither.
func bindListeners(healthzAddr, metricsAddr string) (*listeners, error) {
	l := &listeners{}
	var err error
	if l.healthz, err = bind("--healthz-bind-address", healthzAddr); err != nil {
		return nil, err
	}
	if l.metrics, err = bind("--metrics-bind-address", metricsAddr); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func bind(flag, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	fix := "pick another address"
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		fix = "another process listens there (kube-proxy, another socklb agent, or the other of --healthz-bind-address and --metrics-bind-address): stop it or pick another port"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		fix = "it is not an address of this host: use one of its addresses, 0.0.0.0 or 127.0.0.1"
	case errors.Is(err, syscall.EACCES):
		fix = "a port below 1024 needs CAP_NET_BIND_SERVICE: pick a higher one"
	}
	return nil, fmt.Errorf("%s %s: %w: %s", flag, addr, err, fix)
}

// serve hands each bound port to its server; Close no longer closes them.
func (l *listeners) serve(ctx context.Context, log *slog.Logger, a *agent.Agent, profiling bool) {
	if l.healthz != nil {
		log.Info("serving health", "addr", agent.Serve(ctx, log, "--healthz-bind-address", l.healthz, a.HealthHandler()).String())
		l.healthz = nil
	}
	if l.metrics != nil {
		log.Info("serving metrics", "addr", agent.Serve(ctx, log, "--metrics-bind-address", l.metrics, a.MetricsHandler(profiling)).String())
		l.metrics = nil
	}
}

// Close closes the ports no server took: the start failed after the
// preflight.
func (l *listeners) Close() {
	for _, ln := range []net.Listener{l.healthz, l.metrics} {
		if ln != nil {
			ln.Close()
		}
	}
	l.healthz, l.metrics = nil, nil
}
