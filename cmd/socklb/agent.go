package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/socklb/socklb/pkg/agent"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/host"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
	"github.com/socklb/socklb/pkg/source/kube"
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
				return failBeforeLogging(&o.cfg.Logging, err)
			}
			if o.writeConfigTo != "" {
				if err := writeConfigFile(o.writeConfigTo, o.cfg); err != nil {
					return failBeforeLogging(f.logging, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote the effective configuration to %s\n", o.writeConfigTo)
				return nil
			}
			if err := f.resolveNodeName(); err != nil {
				return failBeforeLogging(f.logging, err)
			}
			return runAgent(f)
		},
	}
	setFlagSets(cmd, o.flagSets())
	for flag, values := range map[string][]string{
		"terminate-sockets":       {"none", "udp", "all"},
		"logging-format":          {"text", "json"},
		"disable-kernel-features": {string(datapath.FeatureSetRetval), string(datapath.FeatureSockDestroy), string(datapath.FeatureKernCtx), string(datapath.FeatureTaskIter)},
		"nodeport-addresses":      {"primary", "localhost", "all"},
	} {
		_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	return cmd
}

// runAgent applies the logging flags, runs the agent and, when the log is
// JSON, makes its fatal error the log's last record (logFatal).
func runAgent(f agentFlags) error {
	log, flush, err := startLogging(f.logging)
	if err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	defer flush()
	return logFatal(log, f.logging, serveAgent(log, f))
}

func serveAgent(log *slog.Logger, f agentFlags) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// As kube-proxy builds its client before its proxier: a wrong
	// kubeconfig fails before the kernel is touched.
	newSrc, err := newSource(f)
	if err != nil {
		return err
	}
	if f.cgroupPath == "" {
		if f.cgroupPath, err = host.Cgroup2Root(); err != nil {
			return err
		}
	}
	// The last checks, before anything is created: after a failure here
	// there is nothing to clean up.
	dpCfg := datapathConfig(f, log)
	lns, err := preflight(f, dpCfg)
	if err != nil {
		return err
	}
	defer lns.Close()
	// The source starts now, before the datapath: its informers' LIST
	// overlaps the BPF load. Its problems wait for the agent.
	late := &lateReport{}
	src, err := newSrc(late.report)
	if err != nil {
		return err
	}
	// The API source records Events on what the agent cannot serve.
	var events *kube.Events
	if ks, ok := src.(*kube.Source); ok {
		events = ks.Events()
	}
	start := time.Now()
	src, dp, err := openBeside(ctx, src, func() (*datapath.Datapath, error) { return datapath.Open(dpCfg) })
	if err != nil {
		return err
	}
	// Close only drops this process's handles: the pinned links keep the
	// hooks serving the last state while the agent is down or upgraded.
	defer dp.Close()
	if err := dp.SocketTerminationError(); err != nil {
		log.Warn("sockets connected to a removed backend will not be destroyed; Services work", "err", err)
	}
	if err := dp.SocketWalkSlowError(); err != nil {
		log.Warn("finding the network namespaces whose sockets a removed backend's walk covers reads /proc per process; Services work", "err", err)
	}
	if err := dp.MemlockError(); err != nil {
		log.Warn("BPF maps that allocate as they fill may not fit in locked memory", "err", err)
	}
	if err := dp.Features()[datapath.FeatureSetRetval]; err != nil {
		log.Warn("a Service with no usable endpoint refuses connections with EPERM, not ECONNREFUSED or EHOSTUNREACH; Services work", "err", err)
	}
	if loaded, err := host.SetConntrackTimeouts(f.procSysNet, f.ctEstablished, f.ctCloseWait); err != nil {
		log.Warn("setting the node's conntrack timeouts as kube-proxy does", "err", err)
	} else if !loaded && (f.ctEstablished > 0 || f.ctCloseWait > 0) {
		log.Info("conntrack is not loaded: no conntrack timeout to set")
	}
	log.Info("datapath ready", "cgroup", f.cgroupPath, "bpffs", f.bpffsPath,
		"adopted_frontends", len(dp.Programmed()), "took", time.Since(start))
	if m := dp.Migration(); m != "" {
		log.Info("the pinned maps had another layout or size; moving to new ones without detaching the hooks", "migration", m)
	}

	cfg := agent.Config{
		Log: log, Datapath: dp, Scrape: dp, Pins: dp, PinCheckInterval: f.pinCheckInterval,
		HealthTimeout: f.healthTimeout, PerServiceMetrics: f.perServiceMetrics,
		Version: version, Revision: buildRevision(),
		NodePortAddresses: f.nodePortAddresses.prefixes, NodePortPrimary: f.nodePortAddresses.primary,
		ExternalIPCIDRs: f.externalIPCIDRs,
		// The agent's own network namespace: the node's, in a hostNetwork pod.
		AddressEvents: func(ctx context.Context, changed func()) {
			host.WatchAddresses(ctx, changed, func(err error) {
				log.Warn("following interface addresses; a new address serves NodePorts at the next API change until this recovers", "err", err)
			})
		},
	}
	if f.packetLB {
		cfg.Packets, cfg.Devices = dp, f.devices
	}
	if events != nil {
		if err := events.Start(ctx); err != nil {
			log.Warn("recording Events; the log and metrics still report every problem", "err", err)
		} else {
			cfg.Events = events
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	late.deliver(a.Report)
	lns.serve(ctx, log, a, f.profiling)
	err = a.Run(ctx, src)
	log.Info("stopping; the datapath stays in place (`socklb cleanup` removes it)")
	return err
}

// datapathConfig is the datapath the flags ask for.
func datapathConfig(f agentFlags, log *slog.Logger) datapath.Config {
	return datapath.Config{
		BPFFSPath:   f.bpffsPath,
		CgroupPath:  f.cgroupPath,
		MaxServices: uint32(f.maxServices),
		MaxBackends: uint32(f.maxBackends),
		MaxAffinity: uint32(f.maxAffinity),
		GrowBudget:  f.mapMemoryBudget,
		MaxFlows:    uint32(f.maxFlows),
		MaxSockets:  uint32(f.maxSockets),
		HostNSOnly:  f.hostNSOnly,
		PacketLB:    f.packetLB,
		NATPortMin:  f.natPortMin,
		NATPortMax:  f.natPortMax,

		TerminateSockets: datapath.SocketTermination(f.terminateSockets),
		LockTimeout:      f.lockTimeout,
		LockWait: func(holder string) {
			log.Info("waiting for another socklb agent to release the pin directory", "bpffs", f.bpffsPath, "holder", holder, "timeout", f.lockTimeout)
		},
		DisableFeatures: f.disableFeatures,
	}
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

// newSource checks what can be checked of the source now and returns
// what builds it once the agent, which takes its problems, exists.
func newSource(f agentFlags) (func(model.ReportFunc) (source.Source, error), error) {
	if f.manifests != "" {
		if err := manifests.CheckDir(f.manifests); err != nil {
			return nil, err
		}
		return func(report model.ReportFunc) (source.Source, error) {
			return manifests.New(manifests.Config{Dir: f.manifests, NodeName: f.nodeName, Report: report})
		}, nil
	}
	return newKubeSource(f)
}
