package datapath

import (
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// The per-packet programs under BPF_PROG_TEST_RUN: a frame in, a frame and
// a verdict out, inside a network namespace whose routes stand for a node
// (nodeLab). Checksums are recomputed from scratch by the test.

// tc verdicts (linux/pkt_cls.h).
const (
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7
)

// The node of nodeLab: dev0 is its device toward the other machines, with
// node2 and a client on-link; node2 routes 10.244.2.0/24; 10.244.1.0/24 are
// this node's pods, behind vpod.
var (
	labNode    = netip.MustParseAddr("10.250.0.11")
	labNode6   = netip.MustParseAddr("fd00:250::11")
	labNode2   = netip.MustParseAddr("10.250.0.12")
	labNode26  = netip.MustParseAddr("fd00:250::12")
	labClient  = netip.MustParseAddr("10.250.0.100")
	labClient6 = netip.MustParseAddr("fd00:250::100")
	node2MAC   = net.HardwareAddr{2, 0, 0, 0, 0, 0x12}
	clientMAC  = net.HardwareAddr{2, 0, 0, 0, 1, 0}
)

type nodeLab struct {
	dev0 int // ifindex of the device
}

func setUpNodeLab(h *netlink.Handle) (nodeLab, error) {
	var lab nodeLab
	for _, f := range []string{"/proc/sys/net/ipv4/conf/all/forwarding", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			return lab, err
		}
	}
	veth := func(name, peer string) (netlink.Link, error) {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
			return nil, err
		}
		for _, n := range []string{name, peer} {
			l, err := h.LinkByName(n)
			if err != nil {
				return nil, err
			}
			if err := h.LinkSetUp(l); err != nil {
				return nil, err
			}
		}
		return h.LinkByName(name)
	}
	dev, err := veth("dev0", "peer0")
	if err != nil {
		return lab, err
	}
	pod, err := veth("vpod", "vpodp")
	if err != nil {
		return lab, err
	}
	lab.dev0 = dev.Attrs().Index
	for _, a := range []string{"10.250.0.11/24", "fd00:250::11/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = 0x02 // IFA_F_NODAD
		if err := h.AddrAdd(dev, addr); err != nil {
			return lab, err
		}
	}
	for _, n := range []struct {
		ip  netip.Addr
		mac net.HardwareAddr
	}{{labNode2, node2MAC}, {labNode26, node2MAC}, {labClient, clientMAC}, {labClient6, clientMAC}} {
		fam := netlink.FAMILY_V4
		if n.ip.Is6() {
			fam = netlink.FAMILY_V6
		}
		if err := h.NeighAdd(&netlink.Neigh{LinkIndex: lab.dev0, Family: fam, State: netlink.NUD_PERMANENT, IP: n.ip.AsSlice(), HardwareAddr: n.mac}); err != nil {
			return lab, err
		}
	}
	routes := []netlink.Route{
		{LinkIndex: lab.dev0, Dst: mustCIDR("10.244.2.0/24"), Gw: labNode2.AsSlice()},
		{LinkIndex: lab.dev0, Dst: mustCIDR("fd00:244:2::/64"), Gw: labNode26.AsSlice()},
		{LinkIndex: pod.Attrs().Index, Dst: mustCIDR("10.244.1.0/24"), Scope: netlink.SCOPE_LINK},
		{LinkIndex: pod.Attrs().Index, Dst: mustCIDR("fd00:244:1::/64")},
	}
	for _, r := range routes {
		if err := h.RouteAdd(&r); err != nil {
			return lab, err
		}
	}
	return lab, nil
}

// listen holds addr with a socket of the node (a listener, or a bound UDP
// socket), in the calling thread's network namespace.
func listen(network string, addr netip.AddrPort) (io.Closer, error) {
	if network == "udp" {
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	}
	return net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// runTC runs prog on frame as if it arrived on (ingress) or left through
// ifindex, and returns the verdict and the frame after it.
func runTC(prog *ebpf.Program, frame []byte, ifindex int) (uint32, []byte, error) {
	var ctx [48]uint32        // struct __sk_buff
	ctx[9] = uint32(ifindex)  // ingress_ifindex
	ctx[10] = uint32(ifindex) // ifindex
	out := make([]byte, len(frame)+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: out, Context: ctx[:]}
	ret, err := prog.Run(&opts)
	return ret, opts.DataOut, err
}

// packetDatapath opens a datapath with the per-packet path and programs fes.
func packetDatapath(t *testing.T, fes ...servicemap.Frontend) *Datapath {
	t.Helper()
	d := openTest(t, Config{PacketLB: true})
	mustApply(t, d, atNodeAddresses(t, d, fes...))
	return d
}

// atNodeAddresses is fes as servicemap gives them, and d set up to serve
// them: a NodePort at a node address becomes the port's one frontend at
// the unspecified address, and the address one of this node's NodePort
// addresses in node_addrs.
func atNodeAddresses(t *testing.T, d *Datapath, fes ...servicemap.Frontend) servicemap.State {
	t.Helper()
	var own []netip.Addr
	for i, fe := range fes {
		if fe.Kind != servicemap.KindNodePort || fe.Key.Addr.IsUnspecified() {
			continue
		}
		if !slices.Contains(own, fe.Key.Addr) {
			own = append(own, fe.Key.Addr)
		}
		fes[i].Key.Addr = netip.IPv4Unspecified()
		if fe.Key.Addr.Is6() {
			fes[i].Key.Addr = netip.IPv6Unspecified()
		}
	}
	if err := d.SetNodeAddresses(own, nil); err != nil {
		t.Fatal(err)
	}
	return state(fes...)
}

func nodePort(addr netip.Addr, port uint16, proto servicemap.Protocol, backends ...string) servicemap.Frontend {
	fe := frontend(addr.String(), port, proto, backends...)
	fe.Kind = servicemap.KindNodePort
	return fe
}

// inNodeLab runs f inside a fresh nodeLab whose dev0 d serves (natDev).
// Like inNewNetNS's, f must not call t.Fatal.
func inNodeLab(t *testing.T, d *Datapath, f func(lab nodeLab)) {
	t.Helper()
	inNewNetNS(t, func(h *netlink.Handle) {
		lab, err := setUpNodeLab(h)
		if err != nil {
			t.Errorf("lab: %v", err)
			return
		}
		natDev(t, d, lab)
		f(lab)
	})
}

// natDev records dev0 as a device socklb serves, SNATing to the node's
// addresses.
func natDev(t *testing.T, d *Datapath, lab nodeLab) {
	nd := socklbbpf.SocklbNatDev{Addr4: addrBytes(labNode), Addr6: addrBytes(labNode6)}
	if err := d.t.natDevs.Put(uint32(lab.dev0), nd); err != nil {
		t.Errorf("nat_devs: %v", err)
	}
}

func flowEvents(t *testing.T, d *Datapath) map[socklbbpf.SocklbFlowEvent]uint64 {
	t.Helper()
	ev, err := d.FlowEvents()
	if err != nil {
		t.Errorf("%v", err)
	}
	return ev
}

// TestNodePortToLocalBackend: a client's packet to a NodePort whose
// backend is a pod of this node is DNATed and handed to the stack, its
// source kept; the pod's reply, leaving through the device, gets the
// NodePort back as its source. TCP and UDP, IPv4 and IPv6, with the
// checksums right after each rewrite.
func TestNodePortToLocalBackend(t *testing.T) {
	cases := []struct {
		name      string
		node, cli netip.Addr
		backend   string
		proto     uint8
		noCsum    bool
	}{
		{"tcp4", labNode, labClient, "10.244.1.5:8080", protoTCP, false},
		{"udp4", labNode, labClient, "10.244.1.5:8080", protoUDP, false},
		{"udp4 without checksum", labNode, labClient, "10.244.1.5:8080", protoUDP, true},
		{"tcp6", labNode6, labClient6, "[fd00:244:1::5]:8080", protoTCP, false},
		{"udp6", labNode6, labClient6, "[fd00:244:1::5]:8080", protoUDP, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := netip.MustParseAddrPort(c.backend)
			d := packetDatapath(t, nodePort(c.node, 30080, servicemap.Protocol(c.proto), c.backend))
			in, out := d.nodeport.SocklbFromNetdev, d.nodeport.SocklbToNetdev
			inNodeLab(t, d, func(lab nodeLab) {
				cli, fe := netip.AddrPortFrom(c.cli, 40000), netip.AddrPortFrom(c.node, 30080)
				pkt := testPacket{src: cli, dst: fe, proto: c.proto, tcpFlags: tcpSYN, noUDPCsum: c.noCsum, payload: []byte("hello")}
				verdict, frame, err := runTC(in, pkt.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				got := parsePacket(t, frame)
				if verdict != tcActOK || got.dst != be || got.src != cli {
					t.Errorf("client -> NodePort: verdict %d, %s -> %s; want %d (to the stack), %s -> %s", verdict, got.src, got.dst, tcActOK, cli, be)
				}
				if !got.ipCsumOK || !got.l4CsumOK {
					t.Errorf("client -> NodePort: checksums after the DNAT: ip ok %v, l4 ok %v (%#04x)", got.ipCsumOK, got.l4CsumOK, got.l4Csum)
				}
				if c.noCsum && got.l4Csum != 0 {
					t.Errorf("a UDP datagram without checksum got one: %#04x", got.l4Csum)
				}
				reply := testPacket{src: be, dst: cli, proto: c.proto, tcpFlags: tcpSYN | tcpACK, noUDPCsum: c.noCsum, payload: []byte("world")}
				verdict, frame, err = runTC(out, reply.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				got = parsePacket(t, frame)
				if verdict != tcActOK || got.src != fe || got.dst != cli {
					t.Errorf("backend's reply: verdict %d, %s -> %s; want %d, %s -> %s", verdict, got.src, got.dst, tcActOK, fe, cli)
				}
				if !got.ipCsumOK || !got.l4CsumOK {
					t.Errorf("backend's reply: checksums after the reverse NAT: ip ok %v, l4 ok %v", got.ipCsumOK, got.l4CsumOK)
				}
				// A packet of no flow leaves untouched.
				other := testPacket{src: be, dst: netip.AddrPortFrom(c.cli, 40001), proto: c.proto}
				verdict, frame, _ = runTC(out, other.bytes(), lab.dev0)
				if got := parsePacket(t, frame); verdict != tcActOK || got.src != be {
					t.Errorf("a packet of no flow was changed: verdict %d, source %s", verdict, got.src)
				}
			})
		})
	}
}

// TestNodePortToRemoteBackend: a flow to a backend behind another node is
// SNATed to this node's address on the device toward it, keeping the
// client's port while no socket of the node owns it (else one from the
// SNAT range), and redirected there with the neighbour's MAC; the remote
// backend's reply to that port is turned back into NodePort -> client and
// redirected to the client.
func TestNodePortToRemoteBackend(t *testing.T) {
	cases := []struct {
		name      string
		node, cli netip.Addr
		backend   string
		proto     uint8
	}{
		{"tcp4", labNode, labClient, "10.244.2.5:8080", protoTCP},
		{"udp4", labNode, labClient, "10.244.2.5:8080", protoUDP},
		{"tcp6", labNode6, labClient6, "[fd00:244:2::5]:8080", protoTCP},
		{"udp6", labNode6, labClient6, "[fd00:244:2::5]:8080", protoUDP},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := netip.MustParseAddrPort(c.backend)
			d := packetDatapath(t, nodePort(c.node, 30080, servicemap.Protocol(c.proto), c.backend))
			in := d.nodeport.SocklbFromNetdev
			inNodeLab(t, d, func(lab nodeLab) {
				cli, fe := netip.AddrPortFrom(c.cli, 40000), netip.AddrPortFrom(c.node, 30080)
				pkt := testPacket{src: cli, dst: fe, proto: c.proto, tcpFlags: tcpSYN, payload: []byte("hello")}
				verdict, frame, err := runTC(in, pkt.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				got := parsePacket(t, frame)
				if verdict != tcActRedirect || got.dst != be || got.src.Addr() != c.node {
					t.Errorf("client -> NodePort: verdict %d, %s -> %s; want %d (redirect), %s:<nat port> -> %s", verdict, got.src, got.dst, tcActRedirect, c.node, be)
				}
				if p := got.src.Port(); p != cli.Port() {
					t.Errorf("SNAT port %d, want the client's %d (no socket of the node holds it)", p, cli.Port())
				}
				if got.dstMAC.String() != node2MAC.String() {
					t.Errorf("redirected to MAC %s, want node2's %s", got.dstMAC, node2MAC)
				}
				if !got.ipCsumOK || !got.l4CsumOK {
					t.Errorf("client -> NodePort: checksums after DNAT+SNAT: ip ok %v, l4 ok %v", got.ipCsumOK, got.l4CsumOK)
				}
				// The same flow's next packet takes the same port.
				_, frame2, _ := runTC(in, pkt.bytes(), lab.dev0)
				if again := parsePacket(t, frame2); again.src != got.src || again.dst != got.dst {
					t.Errorf("the flow's second packet went %s -> %s, the first %s -> %s", again.src, again.dst, got.src, got.dst)
				}
				reply := testPacket{src: be, dst: got.src, proto: c.proto, tcpFlags: tcpSYN | tcpACK, payload: []byte("world")}
				verdict, frame, err = runTC(in, reply.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				back := parsePacket(t, frame)
				if verdict != tcActRedirect || back.src != fe || back.dst != cli {
					t.Errorf("backend's reply: verdict %d, %s -> %s; want %d (redirect), %s -> %s", verdict, back.src, back.dst, tcActRedirect, fe, cli)
				}
				if back.dstMAC.String() != clientMAC.String() {
					t.Errorf("reply redirected to MAC %s, want the client's %s", back.dstMAC, clientMAC)
				}
				if !back.ipCsumOK || !back.l4CsumOK {
					t.Errorf("backend's reply: checksums after the reverse NAT: ip ok %v, l4 ok %v", back.ipCsumOK, back.l4CsumOK)
				}
				if ev := flowEvents(t, d); ev[socklbbpf.SocklbFlowEventFLOW_EV_NEW] != 1 {
					t.Errorf("flows created: %d, want 1 (events %v)", ev[socklbbpf.SocklbFlowEventFLOW_EV_NEW], ev)
				}
				// A listener of the node on the client's next port: that
				// port is the node's, the flow takes one of the range.
				network := "tcp"
				if c.proto == protoUDP {
					network = "udp"
				}
				ln, err := listen(network, netip.AddrPortFrom(c.node, 40001))
				if err != nil {
					t.Errorf("listening on %s:40001: %v", c.node, err)
					return
				}
				defer ln.Close()
				pkt.src = netip.AddrPortFrom(c.cli, 40001)
				_, frame, _ = runTC(in, pkt.bytes(), lab.dev0)
				if p := parsePacket(t, frame).src.Port(); p < DefaultNATPortMin || p > DefaultNATPortMax {
					t.Errorf("with the client's port held by a socket of the node, SNAT port %d; want one of %d-%d", p, DefaultNATPortMin, DefaultNATPortMax)
				}
			})
		})
	}
}

// TestFlowsExpire: the sweep keeps a flow younger than its timeout and
// removes one older (both entries), a TCP flow after a FIN sooner than
// one without, and a reply entry without its flow; a packet of an expired
// flow starts a new one in the program itself.
func TestFlowsExpire(t *testing.T) {
	d := packetDatapath(t, nodePort(labNode, 30080, servicemap.TCP, "10.244.1.5:8080"))
	in := d.nodeport.SocklbFromNetdev
	inNodeLab(t, d, func(lab nodeLab) {
		fe := netip.AddrPortFrom(labNode, 30080)
		send := func(port uint16, flags uint8) {
			pkt := testPacket{src: netip.AddrPortFrom(labClient, port), dst: fe, proto: protoTCP, tcpFlags: flags}
			if v, _, err := runTC(in, pkt.bytes(), lab.dev0); err != nil || v != tcActOK {
				t.Errorf("packet from port %d: verdict %d, %v", port, v, err)
			}
		}
		send(40000, tcpSYN)
		send(40001, tcpSYN)
		send(40001, tcpFIN|tcpACK)
		if st, err := d.ExpireFlows(); err != nil || st.Flows != 2 || st.Expired != 0 {
			t.Errorf("fresh flows: sweep %+v, %v; want 2 flows, none expired", st, err)
		}
		// Age both by 11 s: past the 10 s after a FIN, within the 2 min
		// of an unanswered SYN.
		now, _ := monotonicNow()
		age := func(port uint16, by time.Duration) {
			k := socklbbpf.SocklbFlowKey{Saddr: addrBytes(labClient), Daddr: addrBytes(labNode), Sport: portToMap(port), Dport: portToMap(30080), Proto: protoTCP}
			var v socklbbpf.SocklbFlowValue
			if err := d.t.flows.Lookup(k, &v); err != nil {
				t.Errorf("flow from port %d: %v", port, err)
				return
			}
			v.LastSeen = uint64(now - by)
			if err := d.t.flows.Put(k, v); err != nil {
				t.Error(err)
			}
		}
		age(40000, 11*time.Second)
		age(40001, 11*time.Second)
		orphan := socklbbpf.SocklbFlowKey{Saddr: addrBytes(netip.MustParseAddr("10.244.1.9")), Daddr: addrBytes(labClient), Sport: portToMap(80), Dport: portToMap(1234), Proto: protoTCP}
		if err := d.t.flows.Put(orphan, socklbbpf.SocklbFlowValue{Dir: socklbbpf.SocklbFlowDirFLOW_REPLY}); err != nil {
			t.Error(err)
		}
		st, err := d.ExpireFlows()
		if err != nil || st.Flows != 1 || st.Expired != 1 || st.Orphans != 1 {
			t.Errorf("after 11 s: sweep %+v, %v; want 1 flow left, the closed one expired, 1 orphan", st, err)
		}
		if n, _ := countEntries(d.t.flows); n != 2 {
			t.Errorf("flows map holds %d entries, want the 2 of the flow left", n)
		}
		// Past the SYN timeout, the program itself starts the flow anew.
		age(40000, 3*time.Minute)
		before := flowEvents(t, d)[socklbbpf.SocklbFlowEventFLOW_EV_NEW]
		send(40000, tcpACK)
		if after := flowEvents(t, d)[socklbbpf.SocklbFlowEventFLOW_EV_NEW]; after != before+1 {
			t.Errorf("a packet of an expired flow: flows created %d -> %d, want one more", before, after)
		}
	})
}

// TestExternalScopeAndSourceRanges: a frontend's ScopeExternal twin
// (externalTrafficPolicy Local) answers packets from other machines with
// its own backends while the ScopeAny entry keeps the cluster's for
// sockets; a LoadBalancer IP with loadBalancerSourceRanges admits a source
// inside them and drops one outside. A restarted datapath reads both back.
func TestExternalScopeAndSourceRanges(t *testing.T) {
	anyScope := nodePort(labNode, 30080, servicemap.TCP, "10.244.1.5:8080", "10.244.2.5:8080")
	local := nodePort(labNode, 30080, servicemap.TCP, "10.244.1.5:8080")
	local.Key.Scope = servicemap.ScopeExternal
	local.LocalOnly = true
	lb := frontend("203.0.113.10", 80, servicemap.TCP, "10.244.1.6:8080")
	lb.Kind = servicemap.KindLoadBalancer
	lb.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.250.0.100/32"), netip.MustParsePrefix("192.0.2.0/24")}
	lb6 := frontend("2001:db8::10", 80, servicemap.TCP, "[fd00:244:1::6]:8080")
	lb6.Kind = servicemap.KindLoadBalancer
	lb6.SourceRanges = []netip.Prefix{netip.MustParsePrefix("fd00:250::100/128")}
	cfg := Config{PacketLB: true, BPFFSPath: pinDir(t)}
	d := openTest(t, cfg)
	want := atNodeAddresses(t, d, anyScope, local, lb, lb6)
	mustApply(t, d, want)
	in := d.nodeport.SocklbFromNetdev
	inNodeLab(t, d, func(lab nodeLab) {
		for port := uint16(40000); port < 40020; port++ {
			pkt := testPacket{src: netip.AddrPortFrom(labClient, port), dst: netip.AddrPortFrom(labNode, 30080), proto: protoTCP, tcpFlags: tcpSYN}
			_, frame, _ := runTC(in, pkt.bytes(), lab.dev0)
			if got := parsePacket(t, frame).dst; got != netip.MustParseAddrPort("10.244.1.5:8080") {
				t.Errorf("externalTrafficPolicy Local: a packet from outside went to %s, want the local 10.244.1.5:8080 only", got)
				break
			}
		}
		for _, c := range []struct {
			src, dst string
			want     uint32
		}{
			{"10.250.0.100:40000", "203.0.113.10:80", tcActOK},
			{"192.0.2.7:40000", "203.0.113.10:80", tcActOK},
			{"10.250.0.101:40000", "203.0.113.10:80", tcActShot},
			{"[fd00:250::100]:40000", "[2001:db8::10]:80", tcActOK},
			{"[fd00:250::101]:40000", "[2001:db8::10]:80", tcActShot},
		} {
			pkt := testPacket{src: netip.MustParseAddrPort(c.src), dst: netip.MustParseAddrPort(c.dst), proto: protoTCP, tcpFlags: tcpSYN}
			if v, _, _ := runTC(in, pkt.bytes(), lab.dev0); v != c.want {
				t.Errorf("%s -> %s with loadBalancerSourceRanges: verdict %d, want %d", c.src, c.dst, v, c.want)
			}
		}
		if ev := flowEvents(t, d); ev[socklbbpf.SocklbFlowEventFLOW_EV_SRC_RANGE] != 2 {
			t.Errorf("source range drops counted %d, want 2", ev[socklbbpf.SocklbFlowEventFLOW_EV_SRC_RANGE])
		}
	})
	d.Close()
	d2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	got := d2.Programmed()
	for k, fe := range want {
		if p, ok := got[k]; !ok || !p.Frontend.Equal(fe) {
			t.Errorf("after a restart %s reads back as %+v, want %+v", k, p.Frontend, fe)
		}
	}
}
