package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/socklb/socklb/pkg/datapath"
)

const (
	defaultBPFFS          = "/sys/fs/bpf/socklb"
	defaultHealthzTimeout = 10 * time.Second
)

// agentOptions is what the agent command parses into: the config its flags
// are bound to, and the flags that only steer parsing.
type agentOptions struct {
	cfg           *SocklbConfiguration
	configFile    string
	writeConfigTo string
	// readFile reads --config: os.ReadFile, or through another process's
	// root when `socklb status` parses a running agent's command line.
	readFile func(string) ([]byte, error)
}

// agentFlags is the completed configuration runAgent uses: lists parsed,
// node name resolved.
type agentFlags struct {
	kubeconfig, manifests, nodeName     string
	cgroupPath, bpffsPath               string
	healthzAddr, metricsAddr            string
	disableFeatures                     []datapath.Feature
	maxServices, maxBackends, maxRevNAT uint
	maxAffinity                         uint
	mapMemoryBudget                     uint64
	healthTimeout, lockTimeout          time.Duration
	pinCheckInterval                    time.Duration
	hostNSOnly                          bool
	profiling, profilingAllowRemote     bool
	perServiceMetrics                   bool
	terminateSockets                    string
	nodePortAddresses                   nodePortFlag
	externalIPCIDRs                     []netip.Prefix
	packetLB                            bool
	devices                             []string
	maxFlows, maxSockets                uint
	natPortMin, natPortMax              uint16
	ctEstablished, ctCloseWait          time.Duration
	procSysNet                          string
	logging                             *logsapi.LoggingConfiguration
}

func newAgentOptions() *agentOptions {
	return &agentOptions{cfg: defaultConfig(), readFile: os.ReadFile}
}

// flagSets groups the agent's flags as `socklb agent -h` prints them.
func (o *agentOptions) flagSets() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	c := o.cfg

	fs := fss.FlagSet("API source")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig of the API server to watch (default: in-cluster config)")
	fs.StringVar(&c.Manifests, "manifests", c.Manifests, "watch a directory of Service/EndpointSlice/Node manifests instead of an API server")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "this node's name, as in its Node object (default: $NODE_NAME, else the hostname)")

	fs = fss.FlagSet("Datapath")
	fs.StringVar(&c.CgroupPath, "cgroup-path", c.CgroupPath, "cgroup v2 directory to attach the hooks to (default: the cgroup2 root, i.e. every process of the node)")
	fs.StringVar(&c.BPFFSPath, "bpffs-path", c.BPFFSPath, "directory on a bpf filesystem for socklb's pinned maps and links")
	fs.UintVar(&c.MaxServices, "max-services", c.MaxServices, "capacity of the services map: frontends (address, port, protocol)")
	fs.UintVar(&c.MaxBackends, "max-backends", c.MaxBackends, "capacity of the backends map: endpoints summed over all frontends")
	fs.UintVar(&c.MaxAffinity, "max-affinity", c.MaxAffinity, "capacity of the sessionAffinity LRU: (client, Service port) pairs")
	fs.UintVar(&c.MaxSockets, "max-sockets", c.MaxSockets, "capacity of the sock_conns LRU: TCP sockets connected through a Service and open at once whose getpeername shows the Service's address (about 100 bytes each, preallocated); past it the oldest lose only that")
	fs.StringVar(&c.MapMemoryBudget, "map-memory-budget", c.MapMemoryBudget, "kernel memory the maps --max-services and --max-backends size may grow to, estimated full, when the Services need more room (a quantity such as 2Gi); "+
		"past it the newest Services that do not fit are refused; 0: the maps do not grow. Grown maps keep their size across restarts until --max-* reach it")
	// Kept so existing DaemonSets still start: per-socket state moved to
	// socket-local storage, which has no capacity to set.
	fs.UintVar(&c.MaxRevNAT, "max-revnat", c.MaxRevNAT, "ignored: a connected TCP socket's state is sized by --max-sockets, every other socket's lives in socket-local storage")
	_ = fs.MarkDeprecated("max-revnat", "it sized nothing since per-socket state moved to socket-local storage; --max-sockets sizes the connected TCP sockets' map; drop the flag")
	fs.BoolVar(&c.SocketLBHostNSOnly, "socket-lb-hostns-only", c.SocketLBHostNSOnly, "translate only for sockets in the host network namespace, leaving pods to a sidecar proxy (Istio, Kata, KubeVirt)")
	fs.StringVar(&c.TerminateSockets, "terminate-sockets", c.TerminateSockets, "when a backend leaves, destroy the sockets socklb connected to it: none, udp (connected UDP, e.g. DNS clients) or all (UDP and TCP); needs Linux 6.5+")
	fs.StringSliceVar(&c.DisableKernelFeatures, "disable-kernel-features", c.DisableKernelFeatures, "comma-separated kernel features to treat as missing, to run an older kernel's fallbacks: "+featureNames())
	fs.StringSliceVar(&c.NodePortAddresses, "nodeport-addresses", c.NodePortAddresses, "comma-separated CIDRs and keywords (primary: the Node object's primary IPv4/IPv6 address; localhost: 127.0.0.0/8 and ::1; all): serve NodePorts only on node addresses inside them, per IP family (kube-proxy's flag); empty means all node addresses")
	fs.BoolVar(&c.PacketLB, "packet-lb", c.PacketLB, "serve NodePort, LoadBalancer-IP and externalIP packets that reach the node from other machines, with tcx programs on --devices (Linux 6.6+), and other nodes' NodePorts from sockets here; "+
		"deploy/overlays/replace-kube-proxy and the chart's replace mode turn it on; leave it off beside kube-proxy, which keeps that job")
	fs.StringSliceVar(&c.Devices, "devices", c.Devices, "comma-separated devices --packet-lb serves (Cilium's --devices); default: the devices carrying this node's NodePort addresses")
	fs.UintVar(&c.MaxFlows, "max-flows", c.MaxFlows, "capacity of the flows map: flows from other machines tracked at once (conntrack's table); when it is full new flows are dropped, never live ones")
	fs.StringVar(&c.NATPortRange, "nat-port-range", c.NATPortRange, "source ports of flows SNATed toward a backend on another node (first-last); keep it outside net.ipv4.ip_local_port_range")
	fs.DurationVar(&c.ConntrackTCPEstablished.Duration, "conntrack-tcp-timeout-established", c.ConntrackTCPEstablished.Duration, "set the node's nf_conntrack_tcp_timeout_established at start, as kube-proxy does (its default: 24h); 0 leaves it alone")
	fs.DurationVar(&c.ConntrackTCPCloseWait.Duration, "conntrack-tcp-timeout-close-wait", c.ConntrackTCPCloseWait.Duration, "set the node's nf_conntrack_tcp_timeout_close_wait at start, as kube-proxy does (its default: 1h); 0 leaves it alone")
	fs.StringVar(&c.ProcSysNet, "proc-sys-net", c.ProcSysNet, "the node's /proc/sys/net, where the conntrack timeouts are set: a container that is not privileged has /proc/sys read-only, so the DaemonSet mounts the node's at /host/proc/sys/net, as Cilium does")
	fs.DurationVar(&c.LockTimeout.Duration, "lock-timeout", c.LockTimeout.Duration, "how long to wait for another agent to release --bpffs-path (one agent per pin directory: a rolling update's new pod waits for the old one)")
	fs.DurationVar(&c.PinCheckInterval.Duration, "pin-check-interval", c.PinCheckInterval.Duration, "how often to check that the pinned maps and links are still there, re-creating any removed under the agent")

	fs = fss.FlagSet("Health and metrics")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "address for /healthz and /livez (kube-proxy's port); empty disables")
	fs.DurationVar(&c.HealthzTimeout.Duration, "healthz-timeout", c.HealthzTimeout.Duration, "/healthz fails when a change waited longer than this without being applied")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address for /metrics (kube-proxy's port); empty disables")
	fs.BoolVar(&c.PerServiceMetrics, "per-service-metrics", c.PerServiceMetrics, "export socklb_service_connections_total and socklb_service_datagrams_total: two series per Service port (300k per node at 100k Services), so off by default")

	fs = fss.FlagSet("Security")
	fs.StringSliceVar(&c.ExternalIPCIDRs, "external-ip-cidrs", c.ExternalIPCIDRs, "comma-separated CIDRs: Services' spec.externalIPs inside them are captured even when they are not an address of this node or another Node; "+
		"by default only this node's own addresses are (CVE-2020-8554: anyone who may create a Service could otherwise redirect the node's connections to any address)")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "serve Go's /debug/pprof/ on --metrics-bind-address (kube-proxy's flag); refused on a non-loopback address unless --profiling-allow-remote")
	fs.BoolVar(&c.ProfilingAllowRemote, "profiling-allow-remote", c.ProfilingAllowRemote, "allow --profiling on a --metrics-bind-address other hosts can reach: pprof has no authentication, and anyone reaching it can read the agent's memory profile and stall it with CPU profiles and traces")

	fs = fss.FlagSet("Logging")
	logsapi.AddFlags(&c.Logging, fs)
	// Alpha options need the LoggingAlphaOptions feature gate, which
	// socklb does not expose: do not offer flags that can only fail.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = fs.MarkHidden(name)
	}

	fs = fss.FlagSet("Config file")
	fs.StringVar(&o.configFile, "config", "", "a SocklbConfiguration file ("+configAPIVersion+") setting any of the flags above; flags given on the command line override it")
	fs.StringVar(&o.writeConfigTo, "write-config-to", "", "write the effective configuration (defaults, --config and flags) to this file and exit")
	return fss
}

// loadConfig replaces the flag-bound config with --config's, then sets
// again every flag the command line gave, so flags win over the file.
func (o *agentOptions) loadConfig(fs *pflag.FlagSet) error {
	if o.configFile == "" {
		return nil
	}
	type given struct {
		f     *pflag.Flag
		value string
		slice []string
	}
	var flags []given
	fs.Visit(func(f *pflag.Flag) {
		g := given{f: f, value: f.Value.String()}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			g.slice = s.GetSlice()
		}
		flags = append(flags, g)
	})
	c, err := loadConfigFile(o.configFile, o.readFile)
	if err != nil {
		return err
	}
	// The flags point into *o.cfg: overwrite it in place.
	*o.cfg = *c
	for _, g := range flags {
		var err error
		if s, ok := g.f.Value.(pflag.SliceValue); ok {
			err = s.Replace(g.slice)
		} else {
			err = g.f.Value.Set(g.value)
		}
		if err != nil {
			return fmt.Errorf("--%s=%s over --config: %w", g.f.Name, g.value, err)
		}
	}
	return nil
}

// complete validates the effective config and turns it into agentFlags.
// Every error names the flag (the config field is the flag in camelCase)
// and what to do.
func (o *agentOptions) complete() (agentFlags, error) {
	c := o.cfg
	f := agentFlags{
		kubeconfig: c.Kubeconfig, manifests: c.Manifests, nodeName: c.NodeName,
		cgroupPath: c.CgroupPath, bpffsPath: c.BPFFSPath,
		healthzAddr: c.HealthzBindAddress, metricsAddr: c.MetricsBindAddress,
		maxServices: c.MaxServices, maxBackends: c.MaxBackends, maxRevNAT: c.MaxRevNAT, maxAffinity: c.MaxAffinity,
		healthTimeout: c.HealthzTimeout.Duration, lockTimeout: c.LockTimeout.Duration, pinCheckInterval: c.PinCheckInterval.Duration,
		hostNSOnly: c.SocketLBHostNSOnly, profiling: c.Profiling, profilingAllowRemote: c.ProfilingAllowRemote,
		perServiceMetrics: c.PerServiceMetrics, terminateSockets: c.TerminateSockets,
		packetLB: c.PacketLB, devices: c.Devices, maxFlows: c.MaxFlows, maxSockets: c.MaxSockets,
		ctEstablished: c.ConntrackTCPEstablished.Duration, ctCloseWait: c.ConntrackTCPCloseWait.Duration, procSysNet: c.ProcSysNet,
		logging: &c.Logging,
	}
	var err error
	if f.nodePortAddresses, err = parseNodePortAddresses(strings.Join(c.NodePortAddresses, ",")); err != nil {
		return f, err
	}
	if f.externalIPCIDRs, err = parseExternalIPCIDRs(strings.Join(c.ExternalIPCIDRs, ",")); err != nil {
		return f, err
	}
	if f.disableFeatures, err = datapath.ParseFeatures(strings.Join(c.DisableKernelFeatures, ",")); err != nil {
		return f, fmt.Errorf("--disable-kernel-features: %w", err)
	}
	if f.kubeconfig != "" && f.manifests != "" {
		return f, errors.New("--kubeconfig and --manifests are exclusive: socklb watches one source")
	}
	if f.natPortMin, f.natPortMax, err = parsePortRange(c.NATPortRange); err != nil {
		return f, err
	}
	if len(f.devices) > 0 && !f.packetLB {
		return f, fmt.Errorf("--devices %s is for --packet-lb, which is off: add --packet-lb or drop --devices", strings.Join(f.devices, ","))
	}
	switch datapath.SocketTermination(f.terminateSockets) {
	case datapath.TerminateNone, datapath.TerminateUDP, datapath.TerminateAll:
	default:
		return f, fmt.Errorf("--terminate-sockets=%q: use none, udp or all", f.terminateSockets)
	}
	if !filepath.IsAbs(f.bpffsPath) {
		return f, fmt.Errorf("--bpffs-path=%q: want an absolute directory on a bpf filesystem, such as %s", f.bpffsPath, defaultBPFFS)
	}
	if !filepath.IsAbs(f.procSysNet) {
		return f, fmt.Errorf("--proc-sys-net=%q: want the absolute path of the node's /proc/sys/net (/proc/sys/net, or where the DaemonSet mounts it)", f.procSysNet)
	}
	if f.cgroupPath != "" && !filepath.IsAbs(f.cgroupPath) {
		return f, fmt.Errorf("--cgroup-path=%q: want an absolute cgroup v2 directory, or none for the cgroup2 mount", f.cgroupPath)
	}
	for name, d := range map[string]time.Duration{"--lock-timeout": f.lockTimeout, "--pin-check-interval": f.pinCheckInterval, "--healthz-timeout": f.healthTimeout,
		"--conntrack-tcp-timeout-established": f.ctEstablished, "--conntrack-tcp-timeout-close-wait": f.ctCloseWait} {
		if d < 0 {
			return f, fmt.Errorf("%s=%s: must not be negative", name, d)
		}
	}
	if err := checkBindAddress("--healthz-bind-address", f.healthzAddr); err != nil {
		return f, err
	}
	if err := checkBindAddress("--metrics-bind-address", f.metricsAddr); err != nil {
		return f, err
	}
	if f.mapMemoryBudget, err = parseBudget(c.MapMemoryBudget); err != nil {
		return f, err
	}
	for name, v := range map[string]uint{"--max-services": f.maxServices, "--max-backends": f.maxBackends, "--max-affinity": f.maxAffinity, "--max-flows": f.maxFlows, "--max-sockets": f.maxSockets} {
		if v == 0 || v > 1<<31 {
			return f, fmt.Errorf("%s=%d: must be between 1 and 2^31", name, v)
		}
	}
	if f.profiling && !f.profilingAllowRemote && f.metricsAddr != "" && !isLoopbackAddr(f.metricsAddr) {
		return f, fmt.Errorf("--profiling on --metrics-bind-address %s would serve /debug/pprof/ without authentication to every host that reaches it: "+
			"bind metrics to 127.0.0.1 (the default), drop --profiling, or add --profiling-allow-remote if the network is trusted", f.metricsAddr)
	}
	if errs := logsapi.Validate(&c.Logging, loggingFeatures, nil); len(errs) > 0 {
		return f, fmt.Errorf("logging: %w", errs.ToAggregate())
	}
	return f, nil
}

// resolveNodeName fills the node name the way the flag's help says; it is
// kept out of complete so --write-config-to does not pin one node's name.
func (f *agentFlags) resolveNodeName() error {
	if f.nodeName == "" {
		f.nodeName = os.Getenv("NODE_NAME")
	}
	if f.nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no --node-name, no $NODE_NAME and no hostname: %w", err)
		}
		f.nodeName = h
	}
	return nil
}

// parse finishes what the flag parser started: no stray arguments, the
// config file under the flags, everything validated.
func (o *agentOptions) parse(fs *pflag.FlagSet, args []string) (agentFlags, error) {
	if len(args) > 0 {
		return agentFlags{}, fmt.Errorf("unexpected arguments %q", args)
	}
	if err := o.loadConfig(fs); err != nil {
		return agentFlags{}, err
	}
	return o.complete()
}

// parseAgentFlags parses args as `socklb agent` does, without running it.
func parseAgentFlags(args []string) (agentFlags, error) {
	o := newAgentOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	for _, s := range o.flagSets().FlagSets {
		fs.AddFlagSet(s)
	}
	if err := fs.Parse(args); err != nil {
		return agentFlags{}, err
	}
	f, err := o.parse(fs, fs.Args())
	if err != nil {
		return f, err
	}
	return f, f.resolveNodeName()
}

// parseBudget reads --map-memory-budget, a quantity in bytes.
func parseBudget(s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--map-memory-budget=%q: want a quantity of bytes such as 2Gi or 512Mi, or 0 to keep the --max-* sizes", s)
	}
	return uint64(q.Value()), nil
}

// featureNames lists the optional kernel features for the flag's help,
// from the one list the datapath parses.
func featureNames() string {
	names := make([]string, len(datapath.AllFeatures))
	for i, f := range datapath.AllFeatures {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}
