package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sync"
)

// MultiNodeConfig describes a multi-node lab.
type MultiNodeConfig struct {
	Nodes       int  // 1..MaxNodes; 0 means 2
	PodsPerNode int  // 0..MaxPodsPerNode
	IPv6        bool // IPv6 addresses and routes beside the IPv4 ones
	TCPPort     int  // StartServers' TCP port; default 8080
	UDPPort     int  // StartServers' UDP port; default 5353

	// fault, if set, is called after every construction step; an error
	// it returns fails NewMultiNode there (tests of the cleanup).
	fault func(m *MultiNode, step string) error
}

// MultiNode is a lab of several machines on this one: node namespaces on a
// bridged underlay, pods behind each node, and an outside machine. See the
// package comment for its names and addresses.
type MultiNode struct {
	Nodes    []*Node // Nodes[i-1] is node i
	Outside  *Client // the machine outside the cluster: never any socklb hook
	Underlay string  // the namespace holding the bridge br0

	cfg    MultiNodeConfig
	prefix string // sl-<pid>-<n>

	mu    sync.Mutex
	netns []string // every namespace made, in order of creation
	td    teardown
}

// NewMultiNode builds the lab: the underlay, the outside machine, then each
// node with its pods. On error everything created so far is removed.
func NewMultiNode(cfg MultiNodeConfig) (m *MultiNode, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("lab: needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "nsenter", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("lab: %s not found: %w", tool, err)
		}
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Nodes < 1 || cfg.Nodes > MaxNodes {
		return nil, fmt.Errorf("lab: %d nodes: want 1..%d", cfg.Nodes, MaxNodes)
	}
	if cfg.PodsPerNode < 0 || cfg.PodsPerNode > MaxPodsPerNode {
		return nil, fmt.Errorf("lab: %d pods per node: want 0..%d", cfg.PodsPerNode, MaxPodsPerNode)
	}
	if cfg.TCPPort == 0 {
		cfg.TCPPort = DefaultTCPPort
	}
	if cfg.UDPPort == 0 {
		cfg.UDPPort = DefaultUDPPort
	}
	m = &MultiNode{cfg: cfg, prefix: fmt.Sprintf("sl-%d-%d", os.Getpid(), labSeq.Add(1))}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.Close())
			m = nil
		}
	}()

	m.Underlay = m.prefix + "-ul"
	if err := m.addUnderlay(); err != nil {
		return m, fmt.Errorf("lab: underlay: %w", err)
	}
	if err := m.step("underlay"); err != nil {
		return m, err
	}
	if m.Outside, err = m.addOutside(); err != nil {
		return m, fmt.Errorf("lab: outside: %w", err)
	}
	if err := m.step("outside"); err != nil {
		return m, err
	}
	for i := 1; i <= cfg.Nodes; i++ {
		n, err := m.addNode(i)
		if err != nil {
			return m, fmt.Errorf("lab: node %d: %w", i, err)
		}
		m.Nodes = append(m.Nodes, n)
		if err := m.step("node " + n.Name); err != nil {
			return m, err
		}
		for j := 1; j <= cfg.PodsPerNode; j++ {
			p, err := m.addPod(n, j)
			if err != nil {
				return m, fmt.Errorf("lab: pod %d of node %d: %w", j, i, err)
			}
			n.Pods = append(n.Pods, p)
			if err := m.step("pod " + p.Name); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

// step runs the fault hook after the construction step called name.
func (m *MultiNode) step(name string) error {
	if m.cfg.fault == nil {
		return nil
	}
	return m.cfg.fault(m, name)
}

// addNetNS creates a namespace of this lab and records its name.
func (m *MultiNode) addNetNS(name string) error {
	m.mu.Lock()
	m.netns = append(m.netns, name)
	m.mu.Unlock()
	return addNetNS(&m.td, name)
}

// Node returns node i (1-based), or nil.
func (m *MultiNode) Node(i int) *Node {
	if i < 1 || i > len(m.Nodes) {
		return nil
	}
	return m.Nodes[i-1]
}

// Pods returns every pod, node by node.
func (m *MultiNode) Pods() []*Pod {
	var out []*Pod
	for _, n := range m.Nodes {
		out = append(out, n.Pods...)
	}
	return out
}

// Pod returns the pod with that name ("n2-p1"), or nil.
func (m *MultiNode) Pod(name string) *Pod {
	return named(m.Pods(), func(p *Pod) string { return p.Name }, name)
}

// NetNSNames lists every namespace the lab created, in order of creation.
func (m *MultiNode) NetNSNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.netns...)
}

// Prefix is the common prefix of the lab's namespace names (sl-<pid>-<n>).
func (m *MultiNode) Prefix() string { return m.prefix }

// Close stops the servers and deletes every namespace (their veths and the
// bridge go with them), in reverse order of creation. Idempotent; returns
// every error met.
func (m *MultiNode) Close() error {
	if m == nil {
		return nil
	}
	return m.td.close()
}

// StartServers starts a TCP server on MultiNodeConfig.TCPPort and a UDP
// server on UDPPort in the pod, on all its addresses.
func (m *MultiNode) StartServers(pod string) (*Servers, error) {
	p := m.Pod(pod)
	if p == nil {
		return nil, fmt.Errorf("lab: no pod %q", pod)
	}
	return startServers(p, m.cfg.TCPPort, m.cfg.UDPPort, &m.td)
}

// StartAllServers runs StartServers for every pod.
func (m *MultiNode) StartAllServers() error {
	for _, p := range m.Pods() {
		if _, err := m.StartServers(p.Name); err != nil {
			return err
		}
	}
	return nil
}

// StartServer starts one server (proto "tcp" or "udp") on port in the pod.
// Close stops it.
func (m *MultiNode) StartServer(pod, proto string, port int) (*Server, error) {
	p := m.Pod(pod)
	if p == nil {
		return nil, fmt.Errorf("lab: no pod %q", pod)
	}
	return startServer(p, proto, port, &m.td)
}

// Counts sums, per pod, the Count of its servers of protocol proto. Every
// pod appears, with 0 if it got nothing.
func (m *MultiNode) Counts(proto string) map[string]int64 { return counts(m.Pods(), proto) }

// Peers gives, per pod, the source addresses its servers of protocol proto
// saw, with counts: the client's own address when the path preserved it,
// a node's address when the path SNATed it. Pods that saw nothing are
// left out.
func (m *MultiNode) Peers(proto string) map[string]map[netip.Addr]int64 {
	return peers(m.Pods(), proto)
}

// ResetCounts zeroes every server's counters.
func (m *MultiNode) ResetCounts() { resetCounts(m.Pods()) }
