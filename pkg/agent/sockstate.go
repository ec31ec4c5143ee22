package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/socklb/socklb/pkg/datapath"
)

// SocketStateReader reads the datapath's per-socket state counters;
// (*datapath.Datapath).SocketStateEvents is one.
type SocketStateReader func() (datapath.SocketStateEvents, error)

// collectSocketState exports how per-socket state (which replies and
// socket termination depend on) was lost: socklb_socket_state_evictions_total
// and socklb_socket_state_failures_total. A scrape that cannot read them
// leaves the series out.
func (m *Metrics) collectSocketState(read SocketStateReader) error {
	return m.Registry.Register(&sockStateCollector{
		read: read,
		evicted: prometheus.NewDesc("socklb_socket_state_evictions_total",
			"Per-socket entries overwritten because a socket sent to more than 4 Service ports: replies from the dropped port's backend show the pod address.",
			nil, nil),
		noState: prometheus.NewDesc("socklb_socket_state_failures_total",
			"Translations for which the kernel could not allocate the socket's storage (memory): nothing about the socket was kept.",
			nil, nil),
	})
}

type sockStateCollector struct {
	read             SocketStateReader
	evicted, noState *prometheus.Desc
}

func (c *sockStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.evicted
	ch <- c.noState
}

func (c *sockStateCollector) Collect(ch chan<- prometheus.Metric) {
	ev, err := c.read()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(ev.Evicted))
	ch <- prometheus.MustNewConstMetric(c.noState, prometheus.CounterValue, float64(ev.NoState))
}
