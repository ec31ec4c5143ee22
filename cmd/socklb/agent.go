package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/socklb/socklb/pkg/agent"
	"github.com/socklb/socklb/pkg/agent/healthcheck"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
	"github.com/socklb/socklb/pkg/source/manifests"
)

func newAgentCommand() *cobra.Command {
	o := newAgentOptions()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "watch Services and EndpointSlices, program the maps",
		Long: `socklb agent watches Services, EndpointSlices and Nodes (from an API server,
or from a directory of manifests) and programs the BPF maps the cgroup hooks
read, as kube-proxy programs iptables. Every flag can also be set in a
SocklbConfiguration file (--config); flags given here override it.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := o.parse(cmd.Flags(), args)
			if err != nil {
				return err
			}
			if o.writeConfigTo != "" {
				if err := writeConfigFile(o.writeConfigTo, o.cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote the effective configuration to %s\n", o.writeConfigTo)
				return nil
			}
			if err := f.resolveNodeName(); err != nil {
				return err
			}
			return runAgent(f)
		},
	}
	setFlagSets(cmd, o.flagSets())
	for flag, values := range map[string][]string{
		"terminate-sockets":       {"none", "udp", "all"},
		"logging-format":          {"text", "json"},
		"disable-kernel-features": {string(datapath.FeatureSetRetval), string(datapath.FeatureSockDestroy)},
		"nodeport-addresses":      {"primary", "localhost", "all"},
	} {
		_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	return cmd
}

func runAgent(f agentFlags) error {
	log, flush, err := startLogging(f.logging)
	if err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	defer flush()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	report := func(p servicemap.Problem) {
		log.Warn("skipping unusable input", "kind", p.Kind, "object", p.ObjectName(), "reason", p.Reason)
	}
	base, err := newSource(f, report)
	if err != nil {
		return err
	}
	src := wrapNodeAddresses(withNodeAddresses{Source: base, filter: f.nodePortAddresses, externalIPCIDRs: f.externalIPCIDRs, log: log})
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
