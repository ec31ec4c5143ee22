// Package datapath is the only package that touches the kernel: it loads
// socklb's BPF programs, pins them and their maps under one bpffs directory,
// attaches them to a cgroup, and writes the desired state into the maps as a
// diff. A new agent adopts what an earlier one pinned, so the datapath keeps
// serving across restarts and upgrades.
package datapath

import (
	"fmt"
	"path/filepath"
	"time"
)

// Config says where the datapath lives and how big its maps are.
type Config struct {
	// BPFFSPath is the directory (on a bpffs mount) holding socklb's pins.
	BPFFSPath string
	// CgroupPath is the cgroup v2 directory the hooks attach to. Empty loads
	// and pins the maps without attaching anything (tests, inspect).
	CgroupPath string
	// Map capacities. Zero takes the default.
	MaxServices uint32
	MaxBackends uint32
	MaxAffinity uint32
	MaxFlows    uint32
	MaxSockets  uint32
	// GrowBudget bounds the kernel memory (bytes, mapMemory's estimate at
	// capacity) the maps MaxServices and MaxBackends size may grow to when
	// the Services need more room (Grow); 0: they keep their sizes.
	GrowBudget uint64
	// HostNSOnly translates only for sockets in the agent's network
	// namespace (the host's, for a hostNetwork DaemonSet).
	HostNSOnly bool
	// TerminateSockets picks the sockets destroyed when their backend
	// leaves (default TerminateUDP). Needs a cgroup (it walks the network
	// namespaces of the cgroup's processes) and Linux 6.5+.
	TerminateSockets SocketTermination
	// LockTimeout is how long Open waits for another agent to release the
	// pin directory (default DefaultLockTimeout); LockWait, if set, is
	// called once when it has to wait, with the holder's pid if known.
	LockTimeout time.Duration
	LockWait    func(holder string)
	// PacketLB loads the per-packet path (nodeport.c): NodePort,
	// LoadBalancer and externalIP packets from other machines, served on
	// the devices SetDevices names. Needs Linux 6.6+ (tcx).
	PacketLB bool
	// NATPortMin and NATPortMax bound the source ports of flows SNATed
	// toward another node (default DefaultNATPortMin-DefaultNATPortMax).
	NATPortMin, NATPortMax uint16
	// FlowTimeouts: zero fields take DefaultFlowTimeouts'.
	FlowTimeouts FlowTimeouts
	// DisableFeatures are taken as missing whatever the kernel has: to run
	// an older kernel's fallbacks (tests), or to avoid a broken feature.
	DisableFeatures []Feature
}

// Defaults sized for 100k Services and 1M endpoints: a Service port is one
// service entry per frontend address, each of its endpoints one backend
// (shared by the port's frontends) and one slot per frontend.
// The hash maps are not preallocated, so unused capacity costs only the
// bucket array (16 bytes per entry); the affinity and sock_conns LRUs and
// the stats array (16 bytes per backend id) are preallocated; every other
// socket's state lives in socket-local storage, sized by the sockets.
const (
	DefaultMaxServices = 1 << 18 // 262144 frontends
	// Backends: one per endpoint of a Service port (shared by its
	// frontends); slots and members hold twice as many, one per
	// endpoint of each frontend. 100 000 Services of 10 endpoints and 2
	// ports, a tenth of them with NodePorts, fit: 2 000 000 backends and
	// 2 200 000 slots.
	DefaultMaxBackends = 1 << 21 // 2097152 backends
	DefaultMaxAffinity = 1 << 16 // (client, Service port) pairs with sessionAffinity
	// Flows from other machines the per-packet path tracks at once, as
	// conntrack's table; a full table drops new flows, never live ones.
	DefaultMaxFlows = 1 << 18
	// Connected TCP sockets translated through a Service and open at once
	// whose getpeername shows the ClusterIP (sock_conns, a preallocated
	// LRU: about 100 bytes each); Cilium's --bpf-sock-rev-map-max default.
	DefaultMaxSockets = 1 << 18
	// DefaultGrowBudget lets the default maps (about 1.1 GiB full on any
	// number of CPUs: mapMemory; only what is used is allocated) grow
	// about twice over; a quantity, as --map-memory-budget takes it.
	DefaultGrowBudget = "4Gi"
	// SNAT ports above the kernel's default ephemeral range (32768-60999),
	// so the node's own connections never take one a flow holds.
	DefaultNATPortMin = 61000
	DefaultNATPortMax = 65535
)

func (c Config) withDefaults() Config {
	if c.MaxServices == 0 {
		c.MaxServices = DefaultMaxServices
	}
	if c.MaxBackends == 0 {
		c.MaxBackends = DefaultMaxBackends
	}
	if c.TerminateSockets == "" {
		c.TerminateSockets = TerminateUDP
	}
	if c.MaxAffinity == 0 {
		c.MaxAffinity = DefaultMaxAffinity
	}
	if c.MaxFlows == 0 {
		c.MaxFlows = DefaultMaxFlows
	}
	if c.MaxSockets == 0 {
		c.MaxSockets = DefaultMaxSockets
	}
	ft, def := &c.FlowTimeouts, DefaultFlowTimeouts
	for _, f := range []struct{ v, d *time.Duration }{{&ft.TCPSyn, &def.TCPSyn}, {&ft.TCPEstablished, &def.TCPEstablished},
		{&ft.TCPClosing, &def.TCPClosing}, {&ft.UDP, &def.UDP}, {&ft.UDPStream, &def.UDPStream}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	if c.NATPortMin == 0 && c.NATPortMax == 0 {
		c.NATPortMin, c.NATPortMax = DefaultNATPortMin, DefaultNATPortMax
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = DefaultLockTimeout
	}
	return c
}

func (c Config) validate() error {
	switch c.TerminateSockets {
	case TerminateNone, TerminateUDP, TerminateAll:
	default:
		return fmt.Errorf("socket termination %q: use none, udp or all", c.TerminateSockets)
	}
	if c.NATPortMin < 1024 || c.NATPortMin > c.NATPortMax {
		return fmt.Errorf("SNAT port range %d-%d: want 1024 <= first <= last <= 65535, outside the node's ephemeral range (net.ipv4.ip_local_port_range)", c.NATPortMin, c.NATPortMax)
	}
	return c.validatePaths()
}

func (c Config) validatePaths() error {
	if c.BPFFSPath == "" {
		return fmt.Errorf("bpffs path is empty: pass --bpffs-path, a directory on a bpf filesystem such as /sys/fs/bpf/socklb")
	}
	if !filepath.IsAbs(c.BPFFSPath) {
		return fmt.Errorf("bpffs path %q is not absolute", c.BPFFSPath)
	}
	if c.CgroupPath != "" && !filepath.IsAbs(c.CgroupPath) {
		return fmt.Errorf("cgroup path %q is not absolute", c.CgroupPath)
	}
	return nil
}

func mapsDir(bpffs string) string  { return filepath.Join(bpffs, "maps") }
func linksDir(bpffs string) string { return filepath.Join(bpffs, "links") }
