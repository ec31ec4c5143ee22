package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthHandler serves /healthz and /livez (kube-proxy's paths).
func (a *Agent) HealthHandler() http.Handler { return healthHandler(a.health) }

func healthHandler(h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", h)
	mux.Handle("/livez", h.Livez())
	return mux
}

// MetricsHandler serves /metrics.
// With profiling it also serves Go's /debug/pprof/ there, as kube-proxy's
// --profiling does: the way to see where a slow sync spends its time.
func (a *Agent) MetricsHandler(profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Serve serves h on ln until ctx is done, and returns the address it
// serves on. The caller binds ln first, before anything else of the start
// (cmd/socklb's preflight), so a taken port fails the start naming the
// flag (flag) with nothing created yet.
func Serve(ctx context.Context, log *slog.Logger, flag string, ln net.Listener, h http.Handler) net.Addr {
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
	return ln.Addr()
}
