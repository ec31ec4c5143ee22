package agent

import (
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Metrics are socklb's counterparts of kube-proxy's kubeproxy_* metrics;
// docs/metrics.md maps one to the other. kube-proxy labels most of them
// with ip_family because it runs one proxier per family; socklb has one
// sync loop for both families, so they carry no such label.
type Metrics struct {
	Registry *prometheus.Registry

	syncDuration       prometheus.Histogram
	syncFull           prometheus.Histogram
	syncPartial        prometheus.Histogram
	networkProgramming prometheus.Histogram
	eventToProgrammed  prometheus.Histogram
	lastSync           prometheus.Gauge
	lastQueued         prometheus.Gauge
	serviceChangesPend prometheus.GaugeFunc
	serviceChanges     prometheus.Counter
	endpointChangesPen prometheus.GaugeFunc
	endpointChanges    prometheus.Counter
	frontends          prometheus.Gauge
	backends           prometheus.Gauge
	programmedFE       prometheus.Gauge
	programmedBE       prometheus.Gauge
	services           prometheus.Gauge
	noLocalEndpoints   *prometheus.GaugeVec
	problems           *prometheus.GaugeVec
	problemsTotal      *prometheus.CounterVec
	refusedExternalIPs prometheus.Gauge
	refusedServices    *prometheus.GaugeVec
	pinsRepairedTotal  prometheus.Counter
	failures           prometheus.Counter
	upserts            prometheus.Counter
	removals           prometheus.Counter
	healthzTotal       *prometheus.CounterVec
	livezTotal         *prometheus.CounterVec
	// The per-packet path's, registered with it (collectFlows).
	flows        prometheus.Gauge
	flowsExpired prometheus.Counter
}

// NetworkProgrammingBuckets are kube-proxy's buckets for
// network_programming_duration_seconds: 0.25 s to 5 min.
func NetworkProgrammingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...) // 0.25s, 0.5s
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)      // 1s .. 59s
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)     // 60s .. 115s
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)    // 2min .. 5min
	return b
}

// newMetrics registers every metric; pending counts the changes no sync
// has read yet, at scrape time.
func newMetrics(pending func() changeCount) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "socklb_sync_proxy_rules_duration_seconds",
			Help:    "Time to rebuild the desired state and apply it to the BPF maps (kubeproxy_sync_proxy_rules_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		syncFull: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "socklb_sync_full_proxy_rules_duration_seconds",
			Help:    "Syncs that rebuilt every Service and diffed every frontend: the first, node changes, the periodic resync (kubeproxy_sync_full_proxy_rules_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		syncPartial: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "socklb_sync_partial_proxy_rules_duration_seconds",
			Help:    "Syncs that recomputed and wrote only the Services a change touched (kubeproxy_sync_partial_proxy_rules_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		networkProgramming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "socklb_network_programming_duration_seconds",
			Help: "From an EndpointSlice change (its endpoints.kubernetes.io/last-change-trigger-time annotation) " +
				"to the BPF maps holding it, per changed EndpointSlice (kubeproxy_network_programming_duration_seconds).",
			Buckets: NetworkProgrammingBuckets(),
		}),
		eventToProgrammed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "socklb_event_to_programmed_duration_seconds",
			Help: "From a Service or EndpointSlice change reaching the agent (its informer event) to the BPF maps holding it, per changed Service: " +
				"the agent's own part of socklb_network_programming_duration_seconds, without the API server and the EndpointSlice controller.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_sync_proxy_rules_last_timestamp_seconds",
			Help: "When the last sync that programmed every frontend finished (kubeproxy_sync_proxy_rules_last_timestamp_seconds).",
		}),
		lastQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_sync_proxy_rules_last_queued_timestamp_seconds",
			Help: "When a sync was last queued by a change (kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds).",
		}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_sync_proxy_rules_service_changes_total",
			Help: "Service additions, changes and deletions the syncs have read (kubeproxy_sync_proxy_rules_service_changes_total).",
		}),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_sync_proxy_rules_endpoint_changes_total",
			Help: "EndpointSlice additions, changes and deletions the syncs have read (kubeproxy_sync_proxy_rules_endpoint_changes_total).",
		}),
		frontends: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_frontends",
			Help: "Frontends (address, port, protocol) in the desired state.",
		}),
		backends: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_backends",
			Help: "Backends across all frontends in the desired state.",
		}),
		programmedFE: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_frontends_programmed",
			Help: "Frontends of the desired state that the last sync programmed into the BPF maps.",
		}),
		programmedBE: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_backends_programmed",
			Help: "Backends of the programmed frontends (kubeproxy_sync_proxy_rules_iptables_total is the closest: rules kube-proxy owns).",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_services",
			Help: "Services the agent holds after the last sync.",
		}),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "socklb_sync_proxy_rules_no_local_endpoints_total",
			Help: "Services with a Local traffic policy that have endpoints but none on this node (kubeproxy_sync_proxy_rules_no_local_endpoints_total).",
		}, []string{"traffic_policy"}),
		problems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "socklb_unusable_objects",
			Help: "Problems found in the last sync per object (or part of one) that could not be used and was skipped; the agent log gives each reason.",
		}, []string{"kind", "object"}),
		problemsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "socklb_problems_total",
			Help: "Problems the agent logged, by kind of object: each new one a sync finds (Service, EndpointSlice, Node) and each one a source reports (File, Watch, or an object a manifests directory defines twice).",
		}, []string{"kind"}),
		refusedExternalIPs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "socklb_refused_external_ips",
			Help: "Services' spec.externalIPs left alone in the last sync because they are neither an address of this node or another Node nor inside --external-ip-cidrs (CVE-2020-8554); each is also one of socklb_unusable_objects and a log line naming it.",
		}),
		refusedServices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "socklb_refused_services",
			Help: "Services this node does not program because the maps have no room for them beside older Services (newest first, whole; the API server's and cluster DNS never), by namespace/name, valued by their frontends. A refusal does not fail /healthz; each is logged and gets a CapacityExceeded Event.",
		}, []string{"service"}),
		pinsRepairedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_pins_repaired_total",
			Help: "Pinned maps and links found missing under the running agent and re-created (a link pin removed detaches its hook until then).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_map_update_errors_total",
			Help: "Frontends that could not be written to the BPF maps, counted per sync attempt (kubeproxy_sync_proxy_rules_iptables_restore_failures_total).",
		}),
		upserts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_frontend_updates_total",
			Help: "Frontends written (added or changed).",
		}),
		removals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_frontend_removals_total",
			Help: "Frontends removed.",
		}),
		healthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "socklb_proxy_healthz_total",
			Help: "/healthz answers by HTTP status code (kubeproxy_proxy_healthz_total).",
		}, []string{"code"}),
		livezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "socklb_proxy_livez_total",
			Help: "/livez answers by HTTP status code (kubeproxy_proxy_livez_total).",
		}, []string{"code"}),
	}
	for _, p := range []string{"internal", "external"} {
		m.noLocalEndpoints.WithLabelValues(p)
	}
	for _, k := range model.Kinds {
		m.problemsTotal.WithLabelValues(string(k))
	}
	// Read at scrape time: comparing a snapshot with the last sync's costs
	// O(objects), too much to pay on every API event at 10k Services,
	// where it doubled the work of each change.
	m.serviceChangesPend = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "socklb_sync_proxy_rules_service_changes_pending",
		Help: "Services added, changed or deleted since the last sync read them (kubeproxy_sync_proxy_rules_service_changes_pending).",
	}, func() float64 { return float64(pending().services) })
	m.endpointChangesPen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "socklb_sync_proxy_rules_endpoint_changes_pending",
		Help: "EndpointSlices added, changed or deleted since the last sync read them (kubeproxy_sync_proxy_rules_endpoint_changes_pending).",
	}, func() float64 { return float64(pending().slices) })
	// The Go runtime and the process, as every Kubernetes component
	// exports them: RSS, CPU, open files, goroutines, GC pauses.
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), peakRSS("/proc/self/status"))
	m.Registry.MustRegister(m.syncDuration, m.syncFull, m.syncPartial, m.networkProgramming, m.eventToProgrammed, m.lastSync, m.lastQueued,
		m.serviceChangesPend, m.serviceChanges, m.endpointChangesPen, m.endpointChanges,
		m.frontends, m.backends, m.programmedFE, m.programmedBE, m.services, m.noLocalEndpoints,
		m.problems, m.problemsTotal, m.refusedExternalIPs, m.refusedServices, m.pinsRepairedTotal, m.failures, m.upserts, m.removals, m.healthzTotal, m.livezTotal)
	return m
}

// setBuildInfo exports socklb_build_info, constant 1, labelled with what
// is running: the way to see a half-done rollout across nodes.
func (m *Metrics) setBuildInfo(version, revision string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "socklb_build_info",
		Help: "Always 1; the labels say which socklb build is running.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(version, revision, runtime.Version()).Set(1)
	return m.Registry.Register(g)
}

// queued records that a change queued a sync at t.
func (m *Metrics) queued(t time.Time) {
	m.lastQueued.Set(float64(t.UnixNano()) / 1e9)
}

// checkedOut counts the changes a sync has just read; they are no longer
// pending.
func (m *Metrics) checkedOut(c changeCount) {
	m.serviceChanges.Add(float64(c.services))
	m.endpointChanges.Add(float64(c.slices))
}

// observeSync reads the Tracker's totals, so it costs the failures, not
// the frontends.
func (m *Metrics) observeSync(d time.Duration, done time.Time, full bool, tot servicemap.Totals, state servicemap.State, res datapath.ApplyResult, services int, refused map[types.NamespacedName]servicemap.Demand) {
	m.syncDuration.Observe(d.Seconds())
	if full {
		m.syncFull.Observe(d.Seconds())
	} else {
		m.syncPartial.Observe(d.Seconds())
	}
	if len(res.Failed) == 0 {
		m.lastSync.Set(float64(done.UnixNano()) / 1e9)
	}
	m.frontends.Set(float64(tot.Frontends))
	pfe, pbe := tot.Frontends, tot.Backends
	for k := range res.Failed {
		if fe, ok := state[k]; ok {
			if _, r := refused[fe.Service]; r {
				continue // counted with the refused below
			}
			pfe--
			pbe -= len(fe.Backends)
		}
	}
	for _, r := range refused {
		pfe -= r.Frontends
		pbe -= r.Backends
	}
	m.backends.Set(float64(tot.Backends))
	m.programmedFE.Set(float64(pfe))
	m.programmedBE.Set(float64(pbe))
	for _, p := range []string{"internal", "external"} {
		m.noLocalEndpoints.WithLabelValues(p).Set(float64(len(tot.NoLocal[p])))
	}
	m.services.Set(float64(services))
	m.upserts.Add(float64(res.Upserted))
	m.removals.Add(float64(res.Removed))
}

// observeProgramming records one network programming latency.
func (m *Metrics) observeProgramming(d time.Duration) {
	m.networkProgramming.Observe(d.Seconds())
}

// observeReceived records one change's time inside the agent.
func (m *Metrics) observeReceived(d time.Duration) {
	m.eventToProgrammed.Observe(d.Seconds())
}

// setProblems names every object skipped by the last sync: the set is small
// (bad input), and an alert can say which object to fix.
func (m *Metrics) setProblems(problems []model.Problem) {
	m.problems.Reset()
	refused := 0
	for _, p := range problems {
		m.problems.WithLabelValues(string(p.Kind), p.ObjectName()).Inc()
		if strings.Contains(p.Reason, servicemap.RefusedExternalIP) {
			refused++
		}
	}
	m.refusedExternalIPs.Set(float64(refused))
}

// setRefused names every Service the last sync refused for lack of room.
func (m *Metrics) setRefused(refused map[types.NamespacedName]servicemap.Demand) {
	m.refusedServices.Reset()
	for nn, d := range refused {
		m.refusedServices.WithLabelValues(nn.String()).Set(float64(d.Frontends))
	}
}

// problemLogged counts one logged problem.
func (m *Metrics) problemLogged(k model.Kind) { m.problemsTotal.WithLabelValues(string(k)).Inc() }

func (m *Metrics) pinsRepaired(n int) { m.pinsRepairedTotal.Add(float64(n)) }

func (m *Metrics) addFailures(n int) { m.failures.Add(float64(n)) }
