package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/socklb/socklb/pkg/agent"
	"github.com/socklb/socklb/pkg/agent/healthcheck"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
	"github.com/socklb/socklb/pkg/source/manifests"
)

const defaultBPFFS = "/sys/fs/bpf/socklb"

type agentFlags struct {
	kubeconfig, manifests, nodeName     string
	cgroupPath, bpffsPath               string
	healthzAddr, metricsAddr            string
	disableFeatures                     []datapath.Feature
	maxServices, maxBackends, maxRevNAT uint
	maxAffinity                         uint
	healthTimeout, lockTimeout          time.Duration
	pinCheckInterval                    time.Duration
	hostNSOnly                          bool
	profiling, profilingAllowRemote     bool
	perServiceMetrics                   bool
	terminateSockets                    string
	nodePortAddresses                   nodePortFlag
	externalIPCIDRs                     []netip.Prefix
}

func parseAgentFlags(args []string) (agentFlags, error) {
	var f agentFlags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the API server to watch (default: in-cluster config)")
	fs.StringVar(&f.manifests, "manifests", "", "watch a directory of Service/EndpointSlice/Node manifests instead of an API server")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, as in its Node object (default: $NODE_NAME, else the hostname)")
	fs.StringVar(&f.cgroupPath, "cgroup-path", "", "cgroup v2 directory to attach the hooks to (default: the cgroup2 root, i.e. every process of the node)")
	fs.StringVar(&f.bpffsPath, "bpffs-path", defaultBPFFS, "directory on a bpf filesystem for socklb's pinned maps and links")
	fs.StringVar(&f.healthzAddr, "healthz-bind-address", "0.0.0.0:10256", "address for /healthz and /livez (kube-proxy's port); empty disables")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "127.0.0.1:10249", "address for /metrics (kube-proxy's port); empty disables")
	fs.UintVar(&f.maxServices, "max-services", datapath.DefaultMaxServices, "capacity of the services map: frontends (address, port, protocol)")
	fs.UintVar(&f.maxBackends, "max-backends", datapath.DefaultMaxBackends, "capacity of the backends map: endpoints summed over all frontends")
	// Kept so existing DaemonSets still start: per-socket state moved to
	// socket-local storage, which has no capacity to set.
	fs.UintVar(&f.maxRevNAT, "max-revnat", 0, "ignored (deprecated): per-socket state lives in socket-local storage, freed with each socket")
	fs.UintVar(&f.maxAffinity, "max-affinity", datapath.DefaultMaxAffinity, "capacity of the sessionAffinity LRU: (client, Service port) pairs")
	fs.BoolVar(&f.profiling, "profiling", false, "serve Go's /debug/pprof/ on --metrics-bind-address (kube-proxy's flag); refused on a non-loopback address unless --profiling-allow-remote")
	fs.BoolVar(&f.profilingAllowRemote, "profiling-allow-remote", false, "allow --profiling on a --metrics-bind-address other hosts can reach: pprof has no authentication, and anyone reaching it can read the agent's memory profile and stall it with CPU profiles and traces")
	fs.BoolVar(&f.perServiceMetrics, "per-service-metrics", false, "export socklb_service_connections_total and socklb_service_datagrams_total: two series per Service port (300k per node at 100k Services), so off by default")
	fs.BoolVar(&f.hostNSOnly, "socket-lb-hostns-only", false, "translate only for sockets in the host network namespace, leaving pods to a sidecar proxy (Istio, Kata, KubeVirt)")
	fs.StringVar(&f.terminateSockets, "terminate-sockets", string(datapath.TerminateUDP), "when a backend leaves, destroy the sockets socklb connected to it: none, udp (connected UDP, e.g. DNS clients) or all (UDP and TCP); needs Linux 6.5+")
	disable := fs.String("disable-kernel-features", "", "comma-separated kernel features to treat as missing, to run an older kernel's fallbacks: set_retval, sock_destroy")
	npa := fs.String("nodeport-addresses", "", "comma-separated CIDRs and keywords (primary: the Node object's primary IPv4/IPv6 address; localhost: 127.0.0.0/8 and ::1; all): serve NodePorts only on node addresses inside them, per IP family (kube-proxy's flag); empty means all node addresses")
	eic := fs.String("external-ip-cidrs", "", "comma-separated CIDRs: Services' spec.externalIPs inside them are captured even when they are not an address of this node; "+
		"by default only this node's own addresses are (CVE-2020-8554: anyone who may create a Service could otherwise redirect the node's connections to any address)")
	fs.DurationVar(&f.lockTimeout, "lock-timeout", datapath.DefaultLockTimeout, "how long to wait for another agent to release --bpffs-path (one agent per pin directory: a rolling update's new pod waits for the old one)")
	fs.DurationVar(&f.pinCheckInterval, "pin-check-interval", agent.DefaultPinCheckInterval, "how often to check that the pinned maps and links are still there, re-creating any removed under the agent")
	fs.DurationVar(&f.healthTimeout, "healthz-timeout", 10*time.Second, "/healthz fails when a change waited longer than this without being applied")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	var err error
	if f.nodePortAddresses, err = parseNodePortAddresses(*npa); err != nil {
		return f, err
	}
	if f.externalIPCIDRs, err = parseExternalIPCIDRs(*eic); err != nil {
		return f, err
	}
	if f.disableFeatures, err = datapath.ParseFeatures(*disable); err != nil {
		return f, fmt.Errorf("--disable-kernel-features: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.kubeconfig != "" && f.manifests != "" {
		return f, errors.New("--kubeconfig and --manifests are exclusive: socklb watches one source")
	}
	for name, v := range map[string]uint{"--max-services": f.maxServices, "--max-backends": f.maxBackends, "--max-affinity": f.maxAffinity} {
		if v == 0 || v > 1<<31 {
			return f, fmt.Errorf("%s=%d: must be between 1 and 2^31", name, v)
		}
	}
	if f.profiling && !f.profilingAllowRemote && f.metricsAddr != "" && !isLoopbackAddr(f.metricsAddr) {
		return f, fmt.Errorf("--profiling on --metrics-bind-address %s would serve /debug/pprof/ without authentication to every host that reaches it: "+
			"bind metrics to 127.0.0.1 (the default), drop --profiling, or add --profiling-allow-remote if the network is trusted", f.metricsAddr)
	}
	if f.nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return f, fmt.Errorf("no --node-name and no hostname: %w", err)
		}
		f.nodeName = h
	}
	return f, nil
}

func runAgent(args []string) error {
	f, err := parseAgentFlags(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	report := func(p servicemap.Problem) {
		log.Warn("skipping unusable input", "kind", p.Kind, "object", p.ObjectName(), "reason", p.Reason)
	}
	base, err := newSource(f, report)
	if err != nil {
		return err
	}
	src := withNodeAddresses{Source: base, filter: f.nodePortAddresses, externalIPCIDRs: f.externalIPCIDRs, log: log}
	if f.cgroupPath == "" {
		if f.cgroupPath, err = datapath.Cgroup2Root(); err != nil {
			return err
		}
	}
	start := time.Now()
	dp, err := datapath.Open(datapath.Config{
		BPFFSPath:   f.bpffsPath,
		CgroupPath:  f.cgroupPath,
		MaxServices: uint32(f.maxServices),
		MaxBackends: uint32(f.maxBackends),
		MaxAffinity: uint32(f.maxAffinity),
		HostNSOnly:  f.hostNSOnly,

		TerminateSockets: datapath.SocketTermination(f.terminateSockets),
		LockTimeout:      f.lockTimeout,
		LockWait: func(holder string) {
			log.Info("waiting for another socklb agent to release the pin directory", "bpffs", f.bpffsPath, "holder", holder, "timeout", f.lockTimeout)
		},
		DisableFeatures: f.disableFeatures,
	})
	if err != nil {
		return err
	}
	// Close only drops this process's handles: the pinned links keep the
	// hooks serving the last state while the agent is down or upgraded.
	defer dp.Close()
	if err := dp.SocketTerminationError(); err != nil {
		log.Warn("sockets connected to a removed backend will not be destroyed; Services work", "err", err)
	}
	if err := dp.Features()[datapath.FeatureSetRetval]; err != nil {
		log.Warn("a Service with no usable endpoint refuses connections with EPERM, not ECONNREFUSED or EHOSTUNREACH; Services work", "err", err)
	}
	log.Info("datapath ready", "cgroup", f.cgroupPath, "bpffs", f.bpffsPath,
		"adopted_frontends", len(dp.Programmed()), "took", time.Since(start))

	health := agent.NewHealth(f.healthTimeout)
	metrics := agent.NewMetrics()
	if err := metrics.SetBuildInfo(version, vcsRevision()); err != nil {
		return fmt.Errorf("registering socklb_build_info: %w", err)
	}
	if err := metrics.CollectMapPressure(dp.MapUsage); err != nil {
		return fmt.Errorf("registering map pressure metrics: %w", err)
	}
	if f.perServiceMetrics {
		if err := metrics.CollectServiceStats(dp.ServiceStats); err != nil {
			return fmt.Errorf("registering per-Service connection metrics: %w", err)
		}
	}
	if err := metrics.CollectSocketState(dp.SocketStateEvents); err != nil {
		return fmt.Errorf("registering socket state metrics: %w", err)
	}
	if err := metrics.SetFeatures(dp.Features()); err != nil {
		return fmt.Errorf("registering kernel feature metrics: %w", err)
	}
	if addr, err := agent.Listen(ctx, log, "--healthz-bind-address", f.healthzAddr, agent.HealthHandler(health)); err != nil {
		return err
	} else if addr != nil {
		log.Info("serving health", "addr", addr.String())
	}
	if addr, err := agent.Listen(ctx, log, "--metrics-bind-address", f.metricsAddr, agent.MetricsHandler(metrics, f.profiling)); err != nil {
		return err
	} else if addr != nil {
		log.Info("serving metrics", "addr", addr.String())
	}
	// Per-Service health checks listen on node addresses, as kube-proxy's
	// do; they stop with the agent, as kube-proxy's do.
	hc := &healthcheck.Server{Log: log, Healthy: func() bool { _, st := health.Status(false); return st.Healthy }}
	defer hc.Close()
	a := &agent.Agent{Source: src, Datapath: dp, Log: log, Health: health, Metrics: metrics, HealthChecks: hc,
		Pins: dp, PinCheckInterval: f.pinCheckInterval}
	err = a.Run(ctx)
	log.Info("stopping; the datapath stays in place (`socklb cleanup` removes it)")
	return err
}

// isLoopbackAddr tells whether a bind address (host:port) listens on
// loopback only; an empty host or an unspecified address listens on all.
func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func newSource(f agentFlags, report source.ReportFunc) (source.Source, error) {
	if f.manifests != "" {
		return manifests.New(manifests.Config{Dir: f.manifests, NodeName: f.nodeName, Report: report})
	}
	return newKubeSource(f, report)
}
