package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/socklb/socklb/pkg/datapath"
)

// StatsReader reads the live maps with their per-backend counters;
// datapath.Dump(bpffsPath) is one.
type StatsReader func() ([]datapath.ServiceDump, error)

// CollectServiceStats exports the BPF stats map, read at each scrape and
// summed per Service port, as socklb_service_connections_total and
// socklb_service_datagrams_total: what `iptables -L -v` shows per KUBE-SVC
// chain, which kube-proxy does not export at all. A backend's counters start
// over when its backend is removed and re-added, which rate() treats as a
// counter reset. A failed read is counted in socklb_service_stats_errors_total
// and the scrape goes on without the per-Service series.
func (m *Metrics) CollectServiceStats(read StatsReader) error {
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
	for _, s := range svcs {
		k := key{s.Frontend.Service.Namespace, s.Frontend.Service.Name, s.Frontend.PortName}
		if total[k] == nil {
			total[k] = &sums{}
			order = append(order, k)
		}
		for _, b := range s.Backends {
			total[k].connects += b.Connects
			total[k].datagrams += b.Datagrams
		}
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(c.connects, prometheus.CounterValue, float64(total[k].connects), k.ns, k.name, k.port)
		ch <- prometheus.MustNewConstMetric(c.datagrams, prometheus.CounterValue, float64(total[k].datagrams), k.ns, k.name, k.port)
	}
}
