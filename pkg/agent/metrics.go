package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Metrics are socklb's counterparts of kube-proxy's kubeproxy_* metrics.
type Metrics struct {
	Registry *prometheus.Registry

	syncDuration prometheus.Histogram
	lastSync     prometheus.Gauge
	frontends    prometheus.Gauge
	backends     prometheus.Gauge
	services     prometheus.Gauge
	problems     prometheus.Gauge
	failures     prometheus.Counter
	upserts      prometheus.Counter
	removals     prometheus.Counter
}

func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "socklb_sync_proxy_rules_duration_seconds",
			Help:    "Time to rebuild the desired state and apply it to the BPF maps (kubeproxy_sync_proxy_rules_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_sync_proxy_rules_last_timestamp_seconds",
			Help: "When the last sync finished (kubeproxy_sync_proxy_rules_last_timestamp_seconds).",
		}),
		frontends: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_frontends",
			Help: "Frontends (address, port, protocol) in the desired state.",
		}),
		backends: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_backends",
			Help: "Backends across all frontends in the desired state.",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_services",
			Help: "Services seen in the last snapshot.",
		}),
		problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_unusable_objects",
			Help: "Objects (or parts) skipped in the last sync because they could not be used; the agent log names each.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_map_update_errors_total",
			Help: "Frontends that could not be written to the BPF maps (kubeproxy_sync_proxy_rules_iptables_restore_failures_total).",
		}),
		upserts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_frontend_updates_total",
			Help: "Frontends written (added or changed).",
		}),
		removals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_frontend_removals_total",
			Help: "Frontends removed.",
		}),
	}
	m.Registry.MustRegister(m.syncDuration, m.lastSync, m.frontends, m.backends, m.services,
		m.problems, m.failures, m.upserts, m.removals)
	return m
}

func (m *Metrics) observeSync(d time.Duration, state servicemap.State, res datapath.ApplyResult, in servicemap.Input) {
	m.syncDuration.Observe(d.Seconds())
	m.lastSync.SetToCurrentTime()
	m.frontends.Set(float64(len(state)))
	n := 0
	for _, fe := range state {
		n += len(fe.Backends)
	}
	m.backends.Set(float64(n))
	m.services.Set(float64(len(in.Services)))
	m.upserts.Add(float64(res.Upserted))
	m.removals.Add(float64(res.Removed))
}

func (m *Metrics) setProblems(n int) { m.problems.Set(float64(n)) }

func (m *Metrics) addFailures(n int) { m.failures.Add(float64(n)) }
