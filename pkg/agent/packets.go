package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/host"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// PacketPath is the datapath's per-packet path for traffic from other
// machines; *datapath.Datapath is one.
type PacketPath interface {
	SetDevices([]datapath.Device) error
	ExpireFlows() (datapath.FlowStats, error)
	FlowEvents() (map[socklbbpf.SocklbFlowEvent]uint64, error)
}

// DefaultFlowSweepInterval is how often expired flows are removed: well
// under the shortest timeout (10 s after a FIN), so their room comes back
// before a full map would drop new flows.
const DefaultFlowSweepInterval = 5 * time.Second

// refreshDevices points the per-packet path at the devices it serves: the
// ones --devices names, or else those carrying this node's NodePort
// addresses, each with its SNAT addresses. It runs after every sync that
// read the node's facts, so an address that moves brings its device along.
func (a *Agent) refreshDevices() {
	if a.cfg.Packets == nil {
		return
	}
	in := a.withNodeFacts(a.nodeInput())
	addrs := servicemap.NodePortAddresses(in)
	names := a.cfg.Devices
	var err error
	if len(names) == 0 {
		// The Node object's addresses, not every interface's: a pod
		// bridge's address is one NodePorts answer on from this node,
		// but packets from other machines do not come in there.
		in.LocalAddresses = nil
		own := servicemap.NodePortAddresses(in)
		if names, err = host.DevicesCarrying(own); err == nil && len(names) == 0 {
			err = fmt.Errorf("no Ethernet device carries this node's addresses %v (its Node object's, through --nodeport-addresses): name the devices with --devices", own)
		}
	}
	var devs []host.Device
	if err == nil {
		devs, err = host.Devices(names, addrs)
	}
	want := make([]datapath.Device, 0, len(devs))
	for _, d := range devs {
		want = append(want, datapath.Device{Name: d.Name, Index: d.Index, Addr4: d.Addr4, Addr6: d.Addr6})
	}
	if err == nil && slices.Equal(want, a.devices) && a.devicesOK {
		return
	}
	if err == nil {
		err = a.cfg.Packets.SetDevices(want)
	}
	a.health.DevicesBroken(err)
	a.devicesOK = err == nil
	if err != nil {
		a.log.Error("NodePort, LoadBalancer and externalIP traffic from other machines is not served; /healthz fails until it is", "err", err)
		return
	}
	a.devices = want
	a.log.Info("serving traffic from other machines", "devices", describeDevices(want))
}

// nodeInput is the node facts alone, from whichever kind of source.
func (a *Agent) nodeInput() model.Input {
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	if t, ok := a.src.(source.Tracked); ok {
		return t.NodeInput()
	}
	return a.src.Snapshot()
}

func describeDevices(devs []datapath.Device) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		s := d.Name
		for _, a := range []netip.Addr{d.Addr4, d.Addr6} {
			if a.IsValid() {
				s += " " + a.String()
			}
		}
		out = append(out, s)
	}
	return out
}

// sweepFlows removes expired flows on a timer, as conntrack's garbage
// collector, and keeps socklb_flows current.
func (a *Agent) sweepFlows(ctx context.Context) {
	every := a.cfg.FlowSweepInterval
	if every <= 0 {
		every = DefaultFlowSweepInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last string
	for {
		st, err := a.cfg.Packets.ExpireFlows()
		a.metrics.flows.Set(float64(st.Flows))
		a.metrics.flowsExpired.Add(float64(st.Expired))
		if err != nil && err.Error() != last {
			a.log.Warn("removing expired flows", "err", err)
		}
		last = ""
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// flowEventNames label socklb_flow_events_total, by FLOW_EV_* in
// bpf/c/flowmaps.h.
var flowEventNames = map[socklbbpf.SocklbFlowEvent]string{
	socklbbpf.SocklbFlowEventFLOW_EV_NEW:         "new",
	socklbbpf.SocklbFlowEventFLOW_EV_FULL:        "map_full",
	socklbbpf.SocklbFlowEventFLOW_EV_NO_PORT:     "no_snat_port",
	socklbbpf.SocklbFlowEventFLOW_EV_NO_ENDPOINT: "no_endpoint",
	socklbbpf.SocklbFlowEventFLOW_EV_POLICY_DROP: "no_local_endpoint",
	socklbbpf.SocklbFlowEventFLOW_EV_SRC_RANGE:   "source_range",
	socklbbpf.SocklbFlowEventFLOW_EV_NO_ROUTE:    "no_route",
}

// collectFlows exports the per-packet path's flows: socklb_flows,
// socklb_flows_expired_total and socklb_flow_events_total{event}.
func (m *Metrics) collectFlows(read func() (map[socklbbpf.SocklbFlowEvent]uint64, error)) error {
	m.flows = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "socklb_flows",
		Help: "Flows from other machines the per-packet path tracks, at the last sweep (conntrack's entries; the flows map holds --max-flows).",
	})
	m.flowsExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "socklb_flows_expired_total",
		Help: "Flows removed by the sweep because no packet came within their timeout.",
	})
	if err := m.Registry.Register(m.flows); err != nil {
		return err
	}
	if err := m.Registry.Register(m.flowsExpired); err != nil {
		return err
	}
	return m.Registry.Register(&flowEventCollector{read: read, desc: prometheus.NewDesc("socklb_flow_events_total",
		"Packets from other machines, by what became of them: new flows started; dropped because the flows map was full (raise --max-flows), "+
			"no SNAT port was free toward a backend, the Service had no endpoint, externalTrafficPolicy Local found none on this node, "+
			"the source was outside loadBalancerSourceRanges, or there was no route.",
		[]string{"event"}, nil)})
}

type flowEventCollector struct {
	read func() (map[socklbbpf.SocklbFlowEvent]uint64, error)
	desc *prometheus.Desc
}

func (c *flowEventCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *flowEventCollector) Collect(ch chan<- prometheus.Metric) {
	ev, err := c.read()
	if err != nil {
		return
	}
	for k, name := range flowEventNames {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(ev[k]), name)
	}
}
