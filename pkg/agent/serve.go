package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthHandler serves /healthz and /livez (kube-proxy's paths).
func HealthHandler(h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", h)
	mux.Handle("/livez", h.Livez())
	return mux
}

// MetricsHandler serves /metrics.
func MetricsHandler(m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	return mux
}

// Listen binds addr now, so a taken port is a startup error naming the flag,
// and serves h until ctx is done. An empty addr disables the endpoint.
func Listen(ctx context.Context, log *slog.Logger, flag, addr string, h http.Handler) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "flag", flag, "err", err)
		}
	}()
	return ln.Addr(), nil
}
