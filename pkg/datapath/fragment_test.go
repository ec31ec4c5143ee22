package datapath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestFragmentsFollowTheFlow: kube-proxy's conntrack reassembles fragments
// before translating them; the per-packet path sees them one by one. The
// first fragment of a UDP datagram to a NodePort is translated like a
// whole datagram and leaves its ports behind; the later ones, which carry
// no ports, follow it to the same backend with only their addresses (and
// IP checksum) rewritten, so the backend reassembles a datagram whose UDP
// checksum is right for the new addresses. The backend's fragmented reply
// is translated back the same way. A fragment whose first was never seen
// is left untouched.
func TestFragmentsFollowTheFlow(t *testing.T) {
	for _, c := range []struct {
		name      string
		node, cli netip.Addr
		backend   string
	}{
		{"ipv4", labNode, labClient, "10.244.1.5:8080"},
		{"ipv6", labNode6, labClient6, "[fd00:244:1::5]:8080"},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := netip.MustParseAddrPort(c.backend)
			d := packetDatapath(t, nodePort(c.node, 30080, servicemap.UDP, be.String()))
			in, out := d.nodeport.SocklbFromNetdev, d.nodeport.SocklbToNetdev
			inNodeLab(t, d, func(lab nodeLab) {
				cli, fe := netip.AddrPortFrom(c.cli, 40000), netip.AddrPortFrom(c.node, 30080)

				whole := testPacket{src: cli, dst: fe, proto: protoUDP, payload: payloadOf(200)}.bytes()
				frags := fragment(whole, 7, 72, 144)
				got := runFrags(t, "client -> NodePort", in, lab.dev0, frags)
				checkDatagram(t, "client -> NodePort", got, frags, cli, be)

				stray := fragment(whole, 8, 72, 144)[1]
				if verdict, frame, err := runTC(in, stray, lab.dev0); err != nil || verdict != tcActOK || !bytes.Equal(frame[:len(stray)], stray) {
					t.Errorf("a later fragment whose first was never seen: verdict %d, err %v, changed %v; want it untouched", verdict, err, !bytes.Equal(frame[:len(stray)], stray))
				}

				reply := testPacket{src: be, dst: cli, proto: protoUDP, payload: payloadOf(200)}.bytes()
				rfrags := fragment(reply, 9, 72, 144)
				got = runFrags(t, "backend's reply", out, lab.dev0, rfrags)
				checkDatagram(t, "backend's reply", got, rfrags, fe, cli)
			})
		})
	}
}

func payloadOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// fragment splits an Ethernet+IP frame's L4 bytes at the offsets cuts
// (multiples of 8) into fragments of datagram id: IPv4 fragments, or IPv6
// ones with a fragment header.
func fragment(frame []byte, id uint32, cuts ...int) [][]byte {
	is6 := binary.BigEndian.Uint16(frame[12:]) == 0x86dd
	l3 := 34
	if is6 {
		l3 = 54
	}
	hdr, l4 := frame[:l3], frame[l3:]
	bounds := append([]int{0}, cuts...)
	bounds = append(bounds, len(l4))
	var out [][]byte
	for i := 0; i+1 < len(bounds); i++ {
		chunk := l4[bounds[i]:bounds[i+1]]
		more := i+2 < len(bounds)
		f := append([]byte{}, hdr...)
		if is6 {
			ip := f[14:54]
			proto := ip[6]
			ip[6] = 44
			binary.BigEndian.PutUint16(ip[4:], uint16(8+len(chunk)))
			off := uint16(bounds[i])
			if more {
				off |= 1
			}
			fh := []byte{proto, 0, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint16(fh[2:], off)
			binary.BigEndian.PutUint32(fh[4:], id)
			f = append(append(f, fh...), chunk...)
		} else {
			f = append(f, chunk...)
			ip := f[14:34]
			binary.BigEndian.PutUint16(ip[2:], uint16(20+len(chunk)))
			binary.BigEndian.PutUint16(ip[4:], uint16(id))
			v := uint16(bounds[i] / 8)
			if more {
				v |= 0x2000
			}
			binary.BigEndian.PutUint16(ip[6:], v)
			binary.BigEndian.PutUint16(ip[10:], 0)
			binary.BigEndian.PutUint16(ip[10:], csumFold(csumAdd(0, ip)))
		}
		out = append(out, f)
	}
	return out
}

// runFrags runs prog on each fragment in order, all of which must go to
// the stack, and returns them as it left them.
func runFrags(t *testing.T, what string, prog *ebpf.Program, ifindex int, frags [][]byte) [][]byte {
	var out [][]byte
	for i, f := range frags {
		verdict, frame, err := runTC(prog, f, ifindex)
		if err != nil || verdict != tcActOK {
			t.Errorf("%s, fragment %d: verdict %d, err %v; want %d", what, i, verdict, err, tcActOK)
			return nil
		}
		out = append(out, frame[:len(f)])
	}
	return out
}

// checkDatagram checks fragments got, sent as sent, now carry src -> dst:
// each with its IPv4 checksum right and, after the first, its bytes past
// the IP headers untouched; reassembled, a UDP datagram with those ports
// and a checksum right for those addresses.
func checkDatagram(t *testing.T, what string, got, sent [][]byte, src, dst netip.AddrPort) {
	if len(got) != len(sent) {
		return
	}
	var l4 []byte
	for i, f := range got {
		var s, d netip.Addr
		l3 := 62 // Ethernet, IPv6, fragment header
		if src.Addr().Is4() {
			l3 = 34
			ip := f[14:34]
			if csumFold(csumAdd(0, ip)) != 0 {
				t.Errorf("%s, fragment %d: IP header checksum wrong", what, i)
			}
			s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		} else {
			s, d = netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54]))
		}
		if s != src.Addr() || d != dst.Addr() {
			t.Errorf("%s, fragment %d: %s -> %s, want %s -> %s", what, i, s, d, src.Addr(), dst.Addr())
		}
		if i > 0 && !bytes.Equal(f[l3:], sent[i][l3:]) {
			t.Errorf("%s, fragment %d: bytes past the IP headers changed", what, i)
		}
		l4 = append(l4, f[l3:]...)
	}
	sp, dp := binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
	if sp != src.Port() || dp != dst.Port() {
		t.Errorf("%s: ports %d -> %d, want %d -> %d", what, sp, dp, src.Port(), dst.Port())
	}
	sum := binary.BigEndian.Uint16(l4[6:])
	seg := append([]byte{}, l4...)
	seg[6], seg[7] = 0, 0
	if want := l4Csum(src.Addr(), dst.Addr(), protoUDP, seg); sum != want {
		t.Errorf("%s: the reassembled datagram's UDP checksum is %#04x, want %#04x", what, sum, want)
	}
}
