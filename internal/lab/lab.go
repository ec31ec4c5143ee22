package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
)

// Default server ports, matching examples/demo.yaml's targetPorts.
const (
	DefaultTCPPort = 8080
	DefaultUDPPort = 5353
)

// PodSpec describes one pod of the lab.
type PodSpec struct {
	Name string // e.g. "echo-1": what the servers answer
	IP   string // IPv4 address, e.g. "10.244.1.11"
	IPv6 string // optional IPv6 address, e.g. "fd00::11"
}

// Config describes a lab.
type Config struct {
	Pods    []PodSpec
	TCPPort int // StartServers' TCP port; default 8080
	UDPPort int // StartServers' UDP port; default 5353
}

// Pod is a pod of a running lab: a network namespace and its servers.
type Pod struct {
	Name  string
	Index int    // 1-based: sl-<pid>-<n>-pod<Index> in a Lab, ...-n<i>-p<Index> in a MultiNode
	NetNS string // name for `ip netns exec`
	IP    netip.Addr
	IPv6  netip.Addr // zero if the pod has no IPv6 address

	mu      sync.Mutex
	servers []*Server
}

// Servers returns the servers started in this pod so far.
func (p *Pod) Servers() []*Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Server(nil), p.servers...)
}

// Lab is a set of network namespaces: clients and pods joined by veths.
type Lab struct {
	cfg    Config
	prefix string // sl-<pid>-<n>

	addMu   sync.Mutex // serializes AddClient
	mu      sync.Mutex
	pods    []*Pod
	clients []*Client
	td      teardown
}

var labSeq atomic.Int64

// ClientIPv4 and ClientIPv6 are the addresses of the default client, "cli".
var (
	ClientIPv4 = netip.MustParseAddr("10.244.0.1")
	ClientIPv6 = netip.MustParseAddr("fd00::1")
)

// DefaultClient is the name of the client namespace New creates.
const DefaultClient = "cli"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,15}$`)

// New creates the client namespace "cli" and one namespace per pod, each pod
// joined to the client by its own veth pair. On error everything created so
// far is removed.
func New(cfg Config) (l *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("lab: needs root (network namespaces, cgroups)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("lab: iproute2 `ip` not found: %w", err)
	}
	if cfg.TCPPort == 0 {
		cfg.TCPPort = DefaultTCPPort
	}
	if cfg.UDPPort == 0 {
		cfg.UDPPort = DefaultUDPPort
	}
	l = &Lab{cfg: cfg, prefix: fmt.Sprintf("sl-%d-%d", os.Getpid(), labSeq.Add(1))}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
			l = nil
		}
	}()

	seen := map[string]bool{}
	for i, ps := range cfg.Pods {
		if ps.Name == "" || seen[ps.Name] {
			return l, fmt.Errorf("lab: pod %d: empty or duplicate name %q", i+1, ps.Name)
		}
		seen[ps.Name] = true
		p := &Pod{Name: ps.Name, Index: i + 1, NetNS: fmt.Sprintf("%s-pod%d", l.prefix, i+1)}
		if p.IP, err = netip.ParseAddr(ps.IP); err != nil || !p.IP.Is4() {
			return l, fmt.Errorf("lab: pod %s: bad IPv4 address %q", ps.Name, ps.IP)
		}
		if ps.IPv6 != "" {
			if p.IPv6, err = netip.ParseAddr(ps.IPv6); err != nil || !p.IPv6.Is6() || p.IPv6.Is4In6() {
				return l, fmt.Errorf("lab: pod %s: bad IPv6 address %q", ps.Name, ps.IPv6)
			}
		}
		if err := addNetNS(&l.td, p.NetNS); err != nil {
			return l, err
		}
		l.pods = append(l.pods, p)
	}
	if _, err := l.AddClient(DefaultClient); err != nil {
		return l, err
	}
	return l, nil
}

// AddClient creates another client namespace joined to every pod by its own
// veth pair. The k-th client (k = 1 for "cli") has 10.244.0.<k>/32 and, when
// any pod has IPv6, fd00::1 (k = 1) or fd00::ffff:<k>. name must be short
// lowercase letters, digits and dashes.
func (l *Lab) AddClient(name string) (*Client, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("lab: bad client name %q", name)
	}
	l.addMu.Lock()
	defer l.addMu.Unlock()
	if l.td.isClosed() {
		return nil, errors.New("lab: closed")
	}
	l.mu.Lock()
	for _, c := range l.clients {
		if c.Name == name {
			l.mu.Unlock()
			return nil, fmt.Errorf("lab: client %q exists", name)
		}
	}
	k := len(l.clients) + 1
	l.mu.Unlock()
	if k > 250 {
		return nil, errors.New("lab: too many clients")
	}
	c := &Client{Name: name, NetNS: fmt.Sprintf("%s-%s", l.prefix, name)}
	c.IP = netip.AddrFrom4([4]byte{10, 244, 0, byte(k)})
	if k == 1 {
		c.IPv6 = ClientIPv6
	} else {
		c.IPv6 = netip.MustParseAddr(fmt.Sprintf("fd00::ffff:%x", k))
	}
	if err := addNetNS(&l.td, c.NetNS); err != nil {
		return nil, err
	}
	for _, p := range l.pods {
		if err := l.join(c, k, p); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	l.clients = append(l.clients, c)
	l.mu.Unlock()
	return c, nil
}

// join connects client c (the k-th) and pod p with a veth pair, created
// directly in the two namespaces (never in the host namespace).
func (l *Lab) join(c *Client, k int, p *Pod) error {
	cdev := fmt.Sprintf("vpod%d", p.Index)
	pdev := fmt.Sprintf("vcli%d", k)
	steps := [][]string{
		{"-n", c.NetNS, "link", "add", cdev, "type", "veth", "peer", "name", pdev, "netns", p.NetNS},
		{"-n", c.NetNS, "addr", "add", c.IP.String() + "/32", "dev", cdev},
		{"-n", p.NetNS, "addr", "add", p.IP.String() + "/32", "dev", pdev},
	}
	if p.IPv6.IsValid() {
		steps = append(steps,
			[]string{"-n", c.NetNS, "-6", "addr", "add", c.IPv6.String() + "/128", "dev", cdev, "nodad"},
			[]string{"-n", p.NetNS, "-6", "addr", "add", p.IPv6.String() + "/128", "dev", pdev, "nodad"},
		)
	}
	steps = append(steps,
		[]string{"-n", c.NetNS, "link", "set", cdev, "up"},
		[]string{"-n", p.NetNS, "link", "set", pdev, "up"},
		[]string{"-n", c.NetNS, "route", "add", p.IP.String() + "/32", "dev", cdev, "src", c.IP.String()},
		[]string{"-n", p.NetNS, "route", "add", c.IP.String() + "/32", "dev", pdev},
	)
	if p.IPv6.IsValid() {
		steps = append(steps,
			[]string{"-n", c.NetNS, "-6", "route", "add", p.IPv6.String() + "/128", "dev", cdev, "src", c.IPv6.String()},
			[]string{"-n", p.NetNS, "-6", "route", "add", c.IPv6.String() + "/128", "dev", pdev},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// Pods returns the lab's pods in Config order.
func (l *Lab) Pods() []*Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Pod(nil), l.pods...)
}

// Pod returns the pod with that name, or nil.
func (l *Lab) Pod(name string) *Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return named(l.pods, func(p *Pod) string { return p.Name }, name)
}

// Client returns the client namespace with that name ("" means "cli"), or
// nil.
func (l *Lab) Client(name string) *Client {
	if name == "" {
		name = DefaultClient
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return named(l.clients, func(c *Client) string { return c.Name }, name)
}

// named returns the element of xs called name, or nil.
func named[T any](xs []*T, nameOf func(*T) string, name string) *T {
	for _, x := range xs {
		if nameOf(x) == name {
			return x
		}
	}
	return nil
}

// NetNSNames lists every namespace the lab created.
func (l *Lab) NetNSNames() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.pods {
		out = append(out, p.NetNS)
	}
	for _, c := range l.clients {
		out = append(out, c.NetNS)
	}
	return out
}

// Prefix is the common prefix of the lab's namespace names (sl-<pid>-<n>).
func (l *Lab) Prefix() string { return l.prefix }

// Close stops the servers and deletes the namespaces (with their veths), in
// reverse order of creation. Idempotent; returns every error met.
func (l *Lab) Close() error {
	if l == nil {
		return nil
	}
	return l.td.close()
}
