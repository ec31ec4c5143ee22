package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMultiNode builds two nodes with two pods each (IPv4 and IPv6) and
// checks the paths the per-packet datapath's tests will rely on, before
// any socklb program is involved.
func TestMultiNode(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	m, err := NewMultiNode(MultiNodeConfig{Nodes: 2, PodsPerNode: 2, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := m.StartAllServers(); err != nil {
		t.Fatal(err)
	}
	out, n1, n2 := m.Outside, m.Node(1), m.Node(2)

	t.Run("topology", func(t *testing.T) {
		list := netnsList(t)
		if got := len(m.NetNSNames()); got != 1+1+2+4 {
			t.Errorf("%d namespaces, want underlay, outside, 2 nodes, 4 pods: %v", got, m.NetNSNames())
		}
		for _, ns := range m.NetNSNames() {
			if !strings.Contains(list, ns) {
				t.Errorf("netns %s missing from `ip netns list`", ns)
			}
		}
		for _, ns := range []string{m.Underlay, out.NetNS, n1.NetNS, n2.NetNS} {
			for _, fam := range []string{"-4", "-6"} {
				if r := ipT(t, "-n", ns, fam, "route", "show", "default"); r != "" {
					t.Errorf("%s has a default route (%s): %s", ns, fam, r)
				}
			}
		}
		if a := ipT(t, "-n", m.Underlay, "-o", "addr", "show", "scope", "global"); a != "" {
			t.Errorf("the underlay has addresses: %s", a)
		}
		ports := ipT(t, "-n", m.Underlay, "-o", "link", "show", "master", underlayBridge)
		for _, p := range []string{"vn1@", "vn2@", "vout@"} {
			if !strings.Contains(ports, p) {
				t.Errorf("br0 has no port %s: %s", p, ports)
			}
		}
		for _, n := range m.Nodes {
			d := n.Device
			if d.Name != "eth0" || d.Index <= 0 || len(d.MAC) != 6 || d.IP.Addr() != n.IP || d.IPv6.Addr() != n.IPv6 {
				t.Errorf("node %s device %+v", n.Name, d)
			}
			b, err := n.Command(ctx, "sysctl", "-n", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
				"net.ipv4.conf.all.rp_filter", "net.ipv4.conf.eth0.rp_filter", "net.ipv6.conf.eth0.accept_dad").CombinedOutput()
			if got := strings.Fields(string(b)); err != nil || strings.Join(got, " ") != "1 1 0 0 0" {
				t.Errorf("node %s: forwarding, forwarding6, rp_filter all/eth0, accept_dad = %q (%v), want 1 1 0 0 0", n.Name, b, err)
			}
			link := ipT(t, "-n", n.NetNS, "-o", "link", "show", "eth0")
			if !strings.HasPrefix(link, strconv.Itoa(d.Index)+": eth0@") || !strings.Contains(link, d.MAC.String()) {
				t.Errorf("node %s: Device %+v, but ip says %s", n.Name, d, link)
			}
		}
		for _, p := range m.Pods() {
			if r := ipT(t, "-n", p.NetNS, "route", "show", "default"); r == "" {
				t.Errorf("pod %s has no default route", p.Name)
			}
		}
	})

	// Until RouteVia, the outside reaches nothing beyond the underlay.
	t.Run("outside-unrouted", func(t *testing.T) {
		r := must(t)(out.TCP(ctx, nil, "10.244.1.11:8080", 1))
		wantError(t, "tcp to a pod of node 1", r, "ENETUNREACH")
		r = must(t)(out.TCP(ctx, nil, "[fd00:244:1::11]:8080", 1))
		wantError(t, "tcp6 to a pod of node 1", r, "ENETUNREACH")
	})

	t.Run("outside-to-pod-through-node2", func(t *testing.T) {
		for _, p := range []netip.Prefix{n2.PodCIDR, n2.PodCIDRv6} {
			if err := m.RouteVia(p, 2); err != nil {
				t.Fatal(err)
			}
		}
		m.ResetCounts()
		p := n2.Pods[0]
		// UDP first: it does not retransmit, so a first packet lost on a
		// fresh path (see noDAD) fails here instead of hiding in a SYN retry.
		for _, a := range []netip.Addr{p.IP, p.IPv6} {
			r := must(t)(out.UDP(ctx, nil, netip.AddrPortFrom(a, 5353).String(), 2))
			wantReplies(t, "udp "+a.String(), r, p.Name, 2)
			r = must(t)(out.TCP(ctx, nil, netip.AddrPortFrom(a, 8080).String(), 2))
			wantReplies(t, "tcp "+a.String(), r, p.Name, 2)
		}
		// No NAT anywhere yet: the pod sees the outside's own addresses.
		for _, proto := range []string{"tcp", "udp"} {
			seen := m.Peers(proto)[p.Name]
			if seen[out.IP] != 2 || seen[out.IPv6] != 2 || len(seen) != 2 {
				t.Errorf("%s peers of %s: %v, want 2 each from %s and %s", proto, p.Name, seen, out.IP, out.IPv6)
			}
		}
	})

	t.Run("pod-to-pod-across-nodes", func(t *testing.T) {
		m.ResetCounts()
		from, to := n1.Pods[0], n2.Pods[1]
		for _, a := range []netip.Addr{to.IP, to.IPv6} {
			r := must(t)(from.Client().UDP(ctx, nil, netip.AddrPortFrom(a, 5353).String(), 2))
			wantReplies(t, "udp "+a.String(), r, to.Name, 2)
			r = must(t)(from.Client().TCP(ctx, nil, netip.AddrPortFrom(a, 8080).String(), 2))
			wantReplies(t, "tcp "+a.String(), r, to.Name, 2)
		}
		seen := m.Peers("tcp")[to.Name]
		if seen[from.IP] != 2 || seen[from.IPv6] != 2 {
			t.Errorf("tcp peers of %s: %v, want 2 each from %s and %s", to.Name, seen, from.IP, from.IPv6)
		}
	})

	// A node's sockets reach pods from the node's underlay address.
	t.Run("node-to-pods", func(t *testing.T) {
		m.ResetCounts()
		for _, p := range []*Pod{n1.Pods[1], n2.Pods[0]} {
			for _, a := range []netip.Addr{p.IP, p.IPv6} {
				r := must(t)(n1.Client().TCP(ctx, nil, netip.AddrPortFrom(a, 8080).String(), 1))
				wantReplies(t, "tcp "+a.String(), r, p.Name, 1)
			}
			seen := m.Peers("tcp")[p.Name]
			if seen[n1.IP] != 1 || seen[n1.IPv6] != 1 {
				t.Errorf("tcp peers of %s: %v, want 1 each from %s and %s", p.Name, seen, n1.IP, n1.IPv6)
			}
		}
	})

	// The agent runs through Node.Command: it must see the node's network
	// and the caller's mounts (bpffs, cgroup2), which `ip netns exec` hides.
	t.Run("node-command", func(t *testing.T) {
		cg2, err := Cgroup2Mount()
		if err != nil {
			t.Skipf("no cgroup2: %v", err)
		}
		b, err := n2.Command(ctx, "sh", "-c", "readlink /proc/self/ns/mnt /proc/self/ns/net; stat -f -c %T "+cg2+"; ip -o -4 addr show eth0").CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		ownMnt, _ := os.Readlink("/proc/self/ns/mnt")
		ownNet, _ := os.Readlink("/proc/self/ns/net")
		if len(lines) != 4 || lines[0] != ownMnt || lines[1] == ownNet || lines[2] != "cgroup2fs" ||
			!strings.Contains(lines[3], n2.Device.IP.String()) {
			t.Errorf("inside node 2: %q; want mount ns %s, a net ns other than %s, cgroup2fs at %s, eth0 with %s",
				lines, ownMnt, ownNet, cg2, n2.Device.IP)
		}
		if p := n2.NetNSPath(); p != "/run/netns/"+n2.NetNS {
			t.Errorf("NetNSPath %s", p)
		}
	})

	// A client on a node runs in the node's namespace and, when given one,
	// in the test's cgroup, where the agent's hooks would see it.
	t.Run("node-client-in-cgroup", func(t *testing.T) {
		cg, err := NewCgroup()
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		r := must(t)(n1.Client().Info(ctx, cg))
		if want := "/" + strings.TrimPrefix(cg.Path(), cg.mount+"/"); r.Cgroup != want {
			t.Errorf("labclient cgroup %q, want %q", r.Cgroup, want)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(n1.NetNSPath(), &st); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("net:[%d]", st.Ino); r.NetNS != want {
			t.Errorf("labclient netns %q, want node 1's %q", r.NetNS, want)
		}
	})

	t.Run("route-via", func(t *testing.T) {
		lb := netip.MustParsePrefix("10.96.100.0/24")
		if err := m.RouteVia(lb, 1, 2); err != nil {
			t.Fatal(err)
		}
		if err := m.RouteVia(lb, 2); err != nil { // moves it on the outside
			t.Fatal(err)
		}
		if r := ipT(t, "-n", out.NetNS, "route", "show", lb.String()); !strings.Contains(r, "via "+n2.IP.String()) {
			t.Errorf("outside: %s, want via %s", r, n2.IP)
		}
		if r := ipT(t, "-n", n2.NetNS, "route", "show", lb.String()); !strings.Contains(r, "via "+n1.IP.String()) {
			t.Errorf("node 2: %s, want via %s", r, n1.IP)
		}
		for _, bad := range []struct {
			prefix string
			node   int
			also   []int
		}{
			{"0.0.0.0/0", 1, nil},
			{"::/0", 1, nil},
			{"10.250.0.0/16", 1, nil},
			{"fd00:250::/48", 1, nil},
			{"10.96.0.0/12", 3, nil},
			{"10.96.0.0/12", 1, []int{1}},
		} {
			if err := m.RouteVia(netip.MustParsePrefix(bad.prefix), bad.node, bad.also...); err == nil {
				t.Errorf("RouteVia(%s, %d, %v) accepted", bad.prefix, bad.node, bad.also)
			}
		}
	})

	t.Run("close-cleans-up", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if err := m.Close(); err != nil {
				t.Fatalf("close %d: %v", i+1, err)
			}
		}
		wantNoNetNS(t, m.Prefix())
		if _, err := m.StartServers("n1-p1"); err == nil {
			t.Error("a closed lab started a server")
		}
	})
}

// TestMultiNodeConcurrent builds two labs at once in this process: their
// names differ, and the same addresses in each stay apart.
func TestMultiNodeConcurrent(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var labs [2]*MultiNode
	var errs [2]error
	var wg sync.WaitGroup
	for i := range labs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i], errs[i] = NewMultiNode(MultiNodeConfig{Nodes: 1, PodsPerNode: 1})
		}()
	}
	wg.Wait()
	for _, m := range labs { // before any Fatal: one lab may be up, the other not
		t.Cleanup(func() { _ = m.Close() })
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	for _, m := range labs {
		if err := m.StartAllServers(); err != nil {
			t.Fatal(err)
		}
		if err := m.RouteVia(m.Node(1).PodCIDR, 1); err != nil {
			t.Fatal(err)
		}
	}
	if labs[0].Prefix() == labs[1].Prefix() {
		t.Fatalf("both labs are %s", labs[0].Prefix())
	}
	r := must(t)(labs[0].Outside.TCP(ctx, nil, "10.244.1.11:8080", 3))
	wantReplies(t, "lab 0", r, "n1-p1", 3)
	if a, b := labs[0].Counts("tcp")["n1-p1"], labs[1].Counts("tcp")["n1-p1"]; a != 3 || b != 0 {
		t.Errorf("lab 0's pod counted %d, lab 1's %d; want 3 and 0", a, b)
	}
	for _, m := range labs {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		wantNoNetNS(t, m.Prefix())
	}
}

// TestMultiNodeFailureCleansUp makes NewMultiNode fail part-way, at an
// injected fault or at a real one, and checks that nothing is left behind.
func TestMultiNodeFailureCleansUp(t *testing.T) {
	needRoot(t)
	injected := errors.New("injected fault")
	for _, at := range []string{"underlay", "outside", "node n1", "pod n2-p1"} {
		t.Run(strings.ReplaceAll(at, " ", "-"), func(t *testing.T) {
			var prefix string
			var made []string
			cfg := MultiNodeConfig{Nodes: 2, PodsPerNode: 2, IPv6: true}
			cfg.fault = func(m *MultiNode, step string) error {
				if step != at {
					return nil
				}
				prefix, made = m.Prefix(), m.NetNSNames()
				list := netnsList(t)
				for _, ns := range made {
					if !strings.Contains(list, ns) {
						t.Errorf("at %q: netns %s not there", at, ns)
					}
				}
				return injected
			}
			m, err := NewMultiNode(cfg)
			if !errors.Is(err, injected) || m != nil {
				_ = m.Close()
				t.Fatalf("NewMultiNode = %v, %v; want nil, the injected fault", m, err)
			}
			if len(made) == 0 {
				t.Fatalf("the fault at %q was never reached", at)
			}
			wantNoNetNS(t, prefix)
		})
	}

	// A real failure: node 2's namespace name is taken. The lab must fail
	// there, remove what it made, and leave the namespace it did not make.
	t.Run("name-taken", func(t *testing.T) {
		prefix := fmt.Sprintf("sl-%d-%d", os.Getpid(), labSeq.Load()+1)
		squatter := prefix + "-n2"
		if err := ip("netns", "add", squatter); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ip("netns", "del", squatter) })
		m, err := NewMultiNode(MultiNodeConfig{Nodes: 2, PodsPerNode: 1})
		if err == nil || m != nil {
			_ = m.Close()
			t.Fatalf("NewMultiNode = %v, %v; want an error", m, err)
		}
		if !strings.Contains(err.Error(), squatter) {
			t.Errorf("error %q does not name %s", err, squatter)
		}
		var left []string
		for _, ns := range strings.Split(netnsList(t), "\n") {
			if strings.HasPrefix(ns, prefix+"-") {
				left = append(left, strings.Fields(ns)[0])
			}
		}
		if len(left) != 1 || left[0] != squatter {
			t.Errorf("namespaces left: %v, want only %s", left, squatter)
		}
	})
}

// wantNoNetNS fails t if any namespace of the lab named prefix remains.
func wantNoNetNS(t *testing.T, prefix string) {
	t.Helper()
	if prefix == "" {
		t.Fatal("no lab prefix")
	}
	for _, ns := range strings.Split(netnsList(t), "\n") {
		if strings.HasPrefix(ns, prefix+"-") {
			t.Errorf("netns left behind: %s", ns)
		}
	}
}

// ipT runs ip and returns its trimmed output, failing t on error.
func ipT(t *testing.T, args ...string) string {
	t.Helper()
	out, err := ipOut(args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}
