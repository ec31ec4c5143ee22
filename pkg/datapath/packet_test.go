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
