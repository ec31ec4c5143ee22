package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/socklb/socklb/pkg/datapath"
)

// StatsReader reads the programmed frontends with their per-backend
// counters; (*datapath.Datapath).ServiceStats is one.
type StatsReader func() ([]datapath.ServiceDump, error)

// collectServiceStats exports the BPF stats map, read at each scrape and
// summed per Service port, as socklb_service_connections_total and
// socklb_service_datagrams_total: what `iptables -L -v` shows per KUBE-SVC
// chain, which kube-proxy does not export at all. They are two series per
// Service port (300 000 per node at 100k Services), so the agent exports
// them only with --per-service-metrics. A backend's counters start over
// when its backend is removed and re-added, which rate() treats as a
// counter reset. A failed read is counted in socklb_service_stats_errors_total
// and the scrape goes on without the per-Service series.
func (m *Metrics) collectServiceStats(read StatsReader) error {
	c := &statsCollector{
		read: read,
		connects: prometheus.NewDesc("socklb_service_connections_total",
			"connect() calls (TCP, connected UDP) translated to a backend of this Service port, from the BPF stats map.",
			[]string{"namespace", "service", "port"}, nil),
		datagrams: prometheus.NewDesc("socklb_service_datagrams_total",
			"Unconnected UDP datagrams (sendmsg) translated to a backend of this Service port, from the BPF stats map.",
			[]string{"namespace", "service", "port"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_service_stats_errors_total",
			Help: "Scrapes that could not read the BPF stats map.",
		}),
	}
	return m.Registry.Register(c)
}

type statsCollector struct {
	read                StatsReader
	connects, datagrams *prometheus.Desc
	errors              prometheus.Counter
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connects
	ch <- c.datagrams
	c.errors.Describe(ch)
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.errors.Collect(ch)
	svcs, err := c.read()
	if err != nil {
		c.errors.Inc()
		return
	}
	type key struct{ ns, name, port string }
	type sums struct{ connects, datagrams uint64 }
	total := map[key]*sums{}
	var order []key
	// The frontends of a Service port share their endpoints' counters
	// (one backend id per endpoint of the port): each id counts once.
	type use struct {
		k  key
		id uint32
	}
	seen := map[use]bool{}
	for _, s := range svcs {
		k := key{s.Frontend.Service.Namespace, s.Frontend.Service.Name, s.Frontend.PortName}
		if total[k] == nil {
			total[k] = &sums{}
			order = append(order, k)
		}
		for _, b := range s.Backends {
			if seen[use{k, b.ID}] {
				continue
			}
			seen[use{k, b.ID}] = true
			total[k].connects += b.Connects
			total[k].datagrams += b.Datagrams
		}
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(c.connects, prometheus.CounterValue, float64(total[k].connects), k.ns, k.name, k.port)
		ch <- prometheus.MustNewConstMetric(c.datagrams, prometheus.CounterValue, float64(total[k].datagrams), k.ns, k.name, k.port)
	}
}

// UsageReader reads how full each BPF map is; (*datapath.Datapath).MapUsage
// is one.
type UsageReader func() ([]datapath.MapUsage, error)

// collectMapPressure exports socklb_bpf_map_pressure{map}: entries over
// capacity, read at each scrape, so an alert fires before a map is full
// and a frontend fails to program (Cilium's cilium_bpf_map_pressure).
// A map that could not be read is left out and counted.
func (m *Metrics) collectMapPressure(read UsageReader) error {
	return m.Registry.Register(&pressureCollector{
		read: read,
		pressure: prometheus.NewDesc("socklb_bpf_map_pressure",
			"Entries over capacity of each BPF map (1 is full: writes fail, or an LRU map evicts live entries); the --max-* flags set the capacities.",
			[]string{"map"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "socklb_bpf_map_pressure_errors_total",
			Help: "Scrapes that could not count the entries of some BPF map.",
		}),
	})
}

type pressureCollector struct {
	read     UsageReader
	pressure *prometheus.Desc
	errors   prometheus.Counter
}

func (c *pressureCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pressure
	c.errors.Describe(ch)
}

func (c *pressureCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.errors.Collect(ch)
	usage, err := c.read()
	if err != nil {
		c.errors.Inc()
	}
	for _, u := range usage {
		if u.Capacity == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.pressure, prometheus.GaugeValue, float64(u.Entries)/float64(u.Capacity), u.Name)
	}
}
