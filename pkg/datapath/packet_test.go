package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Packets for the per-packet programs' test runs: Ethernet frames built and
// read back by hand, their checksums computed from scratch, so a test sees
// whether the program's incremental checksum updates are right.

type testPacket struct {
	src, dst       netip.AddrPort
	proto          uint8 // 6 or 17
	tcpFlags       uint8
	noUDPCsum      bool // an IPv4 UDP datagram without a checksum (0)
	dstMAC, srcMAC net.HardwareAddr
	payload        []byte
}

const (
	protoUDP = 17
	tcpSYN   = 0x02
	tcpACK   = 0x10
	tcpFIN   = 0x01
)

func csumFold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func csumAdd(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	return sum
}

// l4Csum is the TCP/UDP checksum of seg (its checksum field zeroed) under
// the pseudo-header of src and dst.
func l4Csum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	var sum uint32
	s, d := src.AsSlice(), dst.AsSlice()
	sum = csumAdd(sum, s)
	sum = csumAdd(sum, d)
	sum += uint32(proto) + uint32(len(seg))
	sum = csumAdd(sum, seg)
	c := csumFold(sum)
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	return c
}

func (p testPacket) bytes() []byte {
	l4 := make([]byte, 0, 20+len(p.payload))
	if p.proto == protoTCP {
		l4 = binary.BigEndian.AppendUint16(l4, p.src.Port())
		l4 = binary.BigEndian.AppendUint16(l4, p.dst.Port())
		l4 = append(l4, 0, 0, 0, 1, 0, 0, 0, 0, 5<<4, p.tcpFlags, 0xff, 0xff, 0, 0, 0, 0)
	} else {
		l4 = binary.BigEndian.AppendUint16(l4, p.src.Port())
		l4 = binary.BigEndian.AppendUint16(l4, p.dst.Port())
		l4 = binary.BigEndian.AppendUint16(l4, uint16(8+len(p.payload)))
		l4 = append(l4, 0, 0)
	}
	l4 = append(l4, p.payload...)
	csumAt := 6
	if p.proto == protoTCP {
		csumAt = 16
	}
	if !(p.proto == protoUDP && p.noUDPCsum) {
		binary.BigEndian.PutUint16(l4[csumAt:], l4Csum(p.src.Addr(), p.dst.Addr(), p.proto, l4))
	}
	dstMAC, srcMAC := p.dstMAC, p.srcMAC
	if dstMAC == nil {
		dstMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	}
	if srcMAC == nil {
		srcMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	}
	out := append([]byte{}, dstMAC...)
	out = append(out, srcMAC...)
	if p.src.Addr().Is4() {
		out = append(out, 0x08, 0x00)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		ip[8] = 64
		ip[9] = p.proto
		s, d := p.src.Addr().As4(), p.dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], csumFold(csumAdd(0, ip)))
		out = append(out, ip...)
	} else {
		out = append(out, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = p.proto
		ip[7] = 64
		s, d := p.src.Addr().As16(), p.dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		out = append(out, ip...)
	}
	return append(out, l4...)
}

// parsedPacket is a frame read back, with whether each checksum is right.
type parsedPacket struct {
	src, dst       netip.AddrPort
	dstMAC, srcMAC net.HardwareAddr
	ipCsumOK       bool
	l4CsumOK       bool
	l4Csum         uint16
}

func parsePacket(t *testing.T, b []byte) parsedPacket {
	t.Helper()
	var p parsedPacket
	p.dstMAC, p.srcMAC = net.HardwareAddr(b[0:6]), net.HardwareAddr(b[6:12])
	var src, dst netip.Addr
	var proto uint8
	var l4 []byte
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		ip := b[14:34]
		p.ipCsumOK = csumFold(csumAdd(0, ip)) == 0
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		proto = ip[9]
		l4 = b[34:]
	case 0x86dd:
		ip := b[14:54]
		p.ipCsumOK = true
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		proto = ip[6]
		l4 = b[54:]
	default:
		t.Fatalf("not IP: %x", b[12:14])
	}
	p.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:]))
	p.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
	at := 6
	if proto == protoTCP {
		at = 16
	}
	p.l4Csum = binary.BigEndian.Uint16(l4[at:])
	seg := append([]byte{}, l4...)
	seg[at], seg[at+1] = 0, 0
	p.l4CsumOK = p.l4Csum == l4Csum(src, dst, proto, seg) || (proto == protoUDP && src.Is4() && p.l4Csum == 0)
	return p
}

// inNewNetNS runs f on a locked thread inside a network namespace made for
// it (and gone with it), so the programs' FIB lookups see the routes and
// neighbours the test sets up there and nothing of the machine's.
func inNewNetNS(t *testing.T, f func(h *netlink.Handle)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// The thread dies with its namespace instead of going back to
		// the pool: never unlocked.
		orig, err := netns.Get()
		if err != nil {
			t.Errorf("reading the thread's netns: %v", err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("creating a netns: %v", err)
			return
		}
		defer ns.Close()
		h, err := netlink.NewHandle()
		if err != nil {
			t.Errorf("netlink handle: %v", err)
			return
		}
		defer h.Close()
		lo, err := h.LinkByName("lo")
		if err == nil {
			err = h.LinkSetUp(lo)
		}
		if err != nil {
			t.Errorf("bringing lo up: %v", err)
			return
		}
		f(h)
	}()
	<-done
}

// icmpError builds an ICMP error from src to dst about the packet quoted
// (its IP header and 8 bytes after, as frame bytes of testPacket.bytes).
func icmpError(src, dst netip.Addr, typ, code uint8, quoted []byte) []byte {
	q := quoted[14:]
	if src.Is4() {
		q = q[:28]
	} else {
		q = q[:48]
	}
	msg := append([]byte{typ, code, 0, 0, 0, 0, 0, 0}, q...)
	out := append([]byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}, 0, 0)
	if src.Is4() {
		binary.BigEndian.PutUint16(msg[2:], csumFold(csumAdd(0, msg)))
		out[12], out[13] = 0x08, 0x00
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(msg)))
		ip[8], ip[9] = 64, 1
		s, d := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], csumFold(csumAdd(0, ip)))
		out = append(out, ip...)
	} else {
		binary.BigEndian.PutUint16(msg[2:], icmp6Csum(src, dst, msg))
		out[12], out[13] = 0x86, 0xdd
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(msg)))
		ip[6], ip[7] = 58, 64
		s, d := src.As16(), dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		out = append(out, ip...)
	}
	return append(out, msg...)
}

func icmp6Csum(src, dst netip.Addr, msg []byte) uint16 {
	m := append([]byte{}, msg...)
	m[2], m[3] = 0, 0
	var sum uint32
	sum = csumAdd(sum, src.AsSlice())
	sum = csumAdd(sum, dst.AsSlice())
	sum += uint32(len(m)) + 58
	return csumFold(csumAdd(sum, m))
}

// parsedICMP is an ICMP error read back, with its checksums checked.
type parsedICMP struct {
	src, dst         netip.Addr
	dstMAC           net.HardwareAddr
	typ, code        uint8
	quoted           parsedPacket // addresses and ports of the quoted packet
	ipCsumOK, csumOK bool
	quotedIPCsumOK   bool
}

func parseICMP(t *testing.T, b []byte) parsedICMP {
	t.Helper()
	var p parsedICMP
	p.dstMAC = net.HardwareAddr(b[0:6])
	var msg []byte
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		ip := b[14:34]
		p.ipCsumOK = csumFold(csumAdd(0, ip)) == 0
		p.src, p.dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		if ip[9] != 1 {
			t.Fatalf("protocol %d, not ICMP", ip[9])
		}
		msg = b[34 : 14+int(binary.BigEndian.Uint16(ip[2:]))]
		p.csumOK = csumFold(csumAdd(0, msg)) == 0
		q := msg[8:28]
		p.quotedIPCsumOK = csumFold(csumAdd(0, q)) == 0
		p.quoted.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(q[12:16])), binary.BigEndian.Uint16(msg[28:]))
		p.quoted.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(q[16:20])), binary.BigEndian.Uint16(msg[30:]))
	case 0x86dd:
		ip := b[14:54]
		p.ipCsumOK, p.quotedIPCsumOK = true, true
		p.src, p.dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		if ip[6] != 58 {
			t.Fatalf("next header %d, not ICMPv6", ip[6])
		}
		msg = b[54 : 54+int(binary.BigEndian.Uint16(ip[4:]))]
		p.csumOK = icmp6Csum(p.src, p.dst, msg) == binary.BigEndian.Uint16(msg[2:])
		q := msg[8:48]
		p.quoted.src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(q[8:24])), binary.BigEndian.Uint16(msg[48:]))
		p.quoted.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(q[24:40])), binary.BigEndian.Uint16(msg[50:]))
	default:
		t.Fatalf("not IP: %x", b[12:14])
	}
	p.typ, p.code = msg[0], msg[1]
	return p
}
