package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/agent/healthcheck"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/host"
	"github.com/socklb/socklb/pkg/model"
)

// Config is everything an Agent is built from; cmd fills it from flags.
type Config struct {
	Log      *slog.Logger
	Datapath Applier
	// Scrape, if set, is read at each scrape for the maps' fill, socket
	// state and kernel features; *datapath.Datapath is one.
	Scrape DatapathReader
	// Pins, if set, is checked every PinCheckInterval (zero: the default).
	Pins             PinRepairer
	PinCheckInterval time.Duration
	// Events, if set, records a Warning Event on each object the agent
	// newly finds unusable or cannot program (kube.Events is one); a
	// manifests directory has no API to record them in.
	Events Recorder
	// HealthChecks gets the healthCheckNodePort listeners of every sync;
	// nil: the agent serves them itself (package healthcheck) until Run
	// returns, as kube-proxy's stop with it.
	HealthChecks HealthCheckSyncer

	// HealthTimeout is --healthz-timeout: how long a change may wait for a
	// sync before /healthz fails.
	HealthTimeout time.Duration
	// RetryMin and RetryMax bound the backoff of retries after a sync that
	// failed to program some frontend; zero means the defaults.
	RetryMin, RetryMax time.Duration
	// ResyncPeriod is the safety net of a full rebuild and diff of every
	// frontend, as kube-proxy's FullSyncPeriod; zero means the default.
	ResyncPeriod time.Duration
	// PerServiceMetrics exports the stats map per Service port (with Scrape).
	PerServiceMetrics bool
	// Version and Revision label socklb_build_info.
	Version, Revision string

	// Packets, if set, is the per-packet path for traffic from other
	// machines: the agent keeps its devices current (Devices, or those
	// carrying the node's NodePort addresses when empty) and sweeps its
	// expired flows every FlowSweepInterval (zero: the default).
	Packets           PacketPath
	Devices           []string
	FlowSweepInterval time.Duration

	// What servicemap needs about the node and the source does not know,
	// added to every snapshot: --nodeport-addresses (prefixes and the
	// keyword primary), --external-ip-cidrs, and the interface addresses,
	// read at every sync so a new address is picked up with the next
	// sync (nil LocalAddresses: host.LocalAddresses; AddressEvents makes
	// an address change a sync of its own).
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	ExternalIPCIDRs   []netip.Prefix
	LocalAddresses    func() ([]netip.Addr, error)
	// AddressEvents, if set, follows the interface addresses: it runs
	// until ctx is done and calls changed after each change
	// (host.WatchAddresses). The agent then syncs within
	// AddressDebounce, so a new address serves NodePorts without waiting
	// for an API change. Nil: the addresses are read at the syncs API
	// changes cause.
	AddressEvents func(ctx context.Context, changed func())
}

// AddressDebounce gathers a burst of address events (an interface coming
// up with several addresses) into one sync: at most one per interval, the
// first at most this long after the first event.
const AddressDebounce = 100 * time.Millisecond

// DatapathReader is what /metrics reads of the datapath, from the maps it
// holds: nothing is reopened per scrape.
type DatapathReader interface {
	MapUsage() ([]datapath.MapUsage, error)
	ServiceStats() ([]datapath.ServiceDump, error)
	SocketStateEvents() (datapath.SocketStateEvents, error)
	Features() map[datapath.Feature]error
}

// New builds an Agent with its health, metrics and, unless cfg says
// otherwise, its per-Service health check server. It touches no kernel
// state and starts nothing: Run does.
func New(cfg Config) (*Agent, error) {
	if cfg.Log == nil || cfg.Datapath == nil {
		return nil, fmt.Errorf("agent.Config needs Log and Datapath")
	}
	a := &Agent{cfg: cfg, log: cfg.Log}
	if a.cfg.LocalAddresses == nil {
		a.cfg.LocalAddresses = host.LocalAddresses
	}
	a.metrics = newMetrics(a.pendingChanges)
	a.health = NewHealth(cfg.HealthTimeout)
	a.health.healthzTotal, a.health.livezTotal = a.metrics.healthzTotal, a.metrics.livezTotal
	if a.cfg.HealthChecks == nil {
		hc := &healthcheck.Server{Log: cfg.Log, Healthy: a.health.ProxyHealthy}
		a.cfg.HealthChecks, a.closeHealthChecks = hc, hc.Close
	}
	if err := a.metrics.setBuildInfo(cfg.Version, cfg.Revision); err != nil {
		return nil, fmt.Errorf("registering socklb_build_info: %w", err)
	}
	if cfg.Packets != nil {
		if err := a.metrics.collectFlows(cfg.Packets.FlowEvents); err != nil {
			return nil, fmt.Errorf("registering flow metrics: %w", err)
		}
	}
	if r := cfg.Scrape; r != nil {
		if err := a.metrics.collectMapPressure(r.MapUsage); err != nil {
			return nil, fmt.Errorf("registering map pressure metrics: %w", err)
		}
		if cfg.PerServiceMetrics {
			if err := a.metrics.collectServiceStats(r.ServiceStats); err != nil {
				return nil, fmt.Errorf("registering per-Service connection metrics: %w", err)
			}
		}
		if err := a.metrics.collectSocketState(r.SocketStateEvents); err != nil {
			return nil, fmt.Errorf("registering socket state metrics: %w", err)
		}
		if err := a.metrics.setFeatures(r.Features()); err != nil {
			return nil, fmt.Errorf("registering kernel feature metrics: %w", err)
		}
	}
	return a, nil
}

// Recorder records a Warning Event on an API object of kind and name.
type Recorder interface {
	Warn(kind model.Kind, name types.NamespacedName, reason, note string)
}
