package datapath

import (
	"net/netip"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestNodePortRejectsWithoutEndpoints: the first packet to a Service with
// no endpoint is answered as iptables' REJECT answers it, with an ICMP
// port unreachable from the frontend quoting that packet, sent back out
// the device it came in on; externalTrafficPolicy Local with no endpoint
// here is dropped without an answer, as kube-proxy's DROP.
func TestNodePortRejectsWithoutEndpoints(t *testing.T) {
	for _, c := range []struct {
		name            string
		node, cli       netip.Addr
		proto           uint8
		wantTyp, wantCd uint8
	}{
		{"tcp4", labNode, labClient, protoTCP, 3, 3},
		{"udp4", labNode, labClient, protoUDP, 3, 3},
		{"tcp6", labNode6, labClient6, protoTCP, 1, 4},
		{"udp6", labNode6, labClient6, protoUDP, 1, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			empty := nodePort(c.node, 30080, servicemap.Protocol(c.proto))
			drop := nodePort(c.node, 30081, servicemap.Protocol(c.proto))
			drop.PolicyDrop = true
			d := packetDatapath(t, empty, drop)
			in := d.nodeport.SocklbFromNetdev
			inNodeLab(t, d, func(lab nodeLab) {
				cli, fe := netip.AddrPortFrom(c.cli, 40000), netip.AddrPortFrom(c.node, 30080)
				pkt := testPacket{src: cli, dst: fe, proto: c.proto, tcpFlags: tcpSYN, srcMAC: clientMAC, payload: []byte("a payload longer than what ICMP quotes of it")}
				verdict, frame, err := runTC(in, pkt.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				if verdict != tcActRedirect {
					t.Errorf("verdict %d, want %d (the error sent back out)", verdict, tcActRedirect)
					return
				}
				got := parseICMP(t, frame)
				if got.typ != c.wantTyp || got.code != c.wantCd || got.src != c.node || got.dst != c.cli {
					t.Errorf("answer: ICMP %d/%d %s -> %s; want %d/%d (port unreachable) %s -> %s", got.typ, got.code, got.src, got.dst, c.wantTyp, c.wantCd, c.node, c.cli)
				}
				if got.quoted.src != cli || got.quoted.dst != fe {
					t.Errorf("the error quotes %s -> %s, want the client's packet %s -> %s", got.quoted.src, got.quoted.dst, cli, fe)
				}
				if got.dstMAC.String() != clientMAC.String() {
					t.Errorf("sent to MAC %s, want the client's %s", got.dstMAC, clientMAC)
				}
				if !got.ipCsumOK || !got.csumOK {
					t.Errorf("checksums: ip ok %v, icmp ok %v", got.ipCsumOK, got.csumOK)
				}
				pkt.dst = netip.AddrPortFrom(c.node, 30081)
				if verdict, _, _ := runTC(in, pkt.bytes(), lab.dev0); verdict != tcActShot {
					t.Errorf("externalTrafficPolicy Local without a local endpoint: verdict %d, want %d (dropped)", verdict, tcActShot)
				}
				ev := flowEvents(t, d)
				if ev[socklbbpf.SocklbFlowEventFLOW_EV_NO_ENDPOINT] != 1 || ev[socklbbpf.SocklbFlowEventFLOW_EV_POLICY_DROP] != 1 {
					t.Errorf("events %v: want one no_endpoint, one policy drop", ev)
				}
			})
		})
	}
}

// TestICMPErrorsFollowTheFlow: an ICMP error about a translated packet
// reaches the other end of the flow as an error about the packet that end
// sent or got (conntrack's RELATED NAT): from a router or the remote
// backend about a SNATed packet, back to the client; from the client about
// a reply, to the remote backend; from a local backend about the client's
// packet, to the client.
func TestICMPErrorsFollowTheFlow(t *testing.T) {
	for _, c := range []struct {
		name              string
		node, cli, router netip.Addr
		remote, local     string
		proto             uint8
		typ, code         uint8 // frag needed / packet too big
	}{
		{"ipv4", labNode, labClient, labNode2, "10.244.2.5:8080", "10.244.1.5:8080", protoUDP, 3, 4},
		{"ipv6", labNode6, labClient6, labNode26, "[fd00:244:2::5]:8080", "[fd00:244:1::5]:8080", protoUDP, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			remote, local := netip.MustParseAddrPort(c.remote), netip.MustParseAddrPort(c.local)
			d := packetDatapath(t,
				nodePort(c.node, 30080, servicemap.UDP, c.remote),
				nodePort(c.node, 30081, servicemap.UDP, c.local))
			in, out := d.nodeport.SocklbFromNetdev, d.nodeport.SocklbToNetdev
			inNodeLab(t, d, func(lab nodeLab) {
				cli := netip.AddrPortFrom(c.cli, 40000)
				fe, fe2 := netip.AddrPortFrom(c.node, 30080), netip.AddrPortFrom(c.node, 30081)
				check := func(what string, verdict uint32, frame []byte, wantVerdict uint32, src, dst netip.Addr, qsrc, qdst netip.AddrPort) {
					t.Helper()
					got := parseICMP(t, frame)
					if verdict != wantVerdict || got.src != src || got.dst != dst || got.quoted.src != qsrc || got.quoted.dst != qdst {
						t.Errorf("%s: verdict %d, %s -> %s quoting %s -> %s; want %d, %s -> %s quoting %s -> %s",
							what, verdict, got.src, got.dst, got.quoted.src, got.quoted.dst, wantVerdict, src, dst, qsrc, qdst)
					}
					if !got.ipCsumOK || !got.csumOK || !got.quotedIPCsumOK {
						t.Errorf("%s: checksums: ip %v, icmp %v, quoted ip %v", what, got.ipCsumOK, got.csumOK, got.quotedIPCsumOK)
					}
				}
				// A flow to the remote backend: what was sent toward it.
				_, sent, err := runTC(in, testPacket{src: cli, dst: fe, proto: c.proto, payload: []byte("0123456789")}.bytes(), lab.dev0)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				snat := parsePacket(t, sent).src
				// A router on the way to the backend: its own address stays.
				v, frame, _ := runTC(in, icmpError(c.router, c.node, c.typ, c.code, sent), lab.dev0)
				check("router -> node about a SNATed packet", v, frame, tcActRedirect, c.router, c.cli, cli, fe)
				// The backend itself: it shows as the frontend.
				v, frame, _ = runTC(in, icmpError(remote.Addr(), c.node, c.typ, c.code, sent), lab.dev0)
				check("backend -> node about a SNATed packet", v, frame, tcActRedirect, c.node, c.cli, cli, fe)
				// The client, about the reply it got (frontend -> client).
				reply := testPacket{src: fe, dst: cli, proto: c.proto, payload: []byte("0123456789")}.bytes()
				v, frame, _ = runTC(in, icmpError(c.cli, c.node, c.typ, c.code, reply), lab.dev0)
				check("client -> frontend about a reply", v, frame, tcActRedirect, c.node, remote.Addr(), remote, snat)
				// A flow to the local backend, and the backend's error
				// about the client's packet (as delivered: client -> pod).
				if _, _, err := runTC(in, testPacket{src: cli, dst: fe2, proto: c.proto}.bytes(), lab.dev0); err != nil {
					t.Errorf("run: %v", err)
					return
				}
				delivered := testPacket{src: cli, dst: local, proto: c.proto, payload: []byte("0123456789")}.bytes()
				v, frame, _ = runTC(out, icmpError(local.Addr(), c.cli, 3, 3, delivered), lab.dev0)
				check("local backend -> client about the client's packet", v, frame, tcActOK, c.node, c.cli, cli, fe2)
				// An error about no flow passes untouched.
				stray := testPacket{src: cli, dst: netip.AddrPortFrom(local.Addr(), 9), proto: c.proto}.bytes()
				v, frame, _ = runTC(out, icmpError(local.Addr(), c.cli, 3, 3, stray), lab.dev0)
				check("an error about no flow", v, frame, tcActOK, local.Addr(), c.cli, cli, netip.AddrPortFrom(local.Addr(), 9))
			})
		})
	}
}
