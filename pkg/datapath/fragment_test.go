package datapath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestFragmentsPassUntouched: a difference with kube-proxy, whose
// conntrack reassembles fragments before translating. The per-packet path
// sees fragments one by one and leaves every fragment of a fragmented IPv4
// datagram, the first included, to the stack byte for byte: translating
// the first alone would split the datagram between two destinations. So a
// datagram larger than the path MTU is not served from outside.
func TestFragmentsPassUntouched(t *testing.T) {
	d := packetDatapath(t, nodePort(labNode, 30080, servicemap.UDP, "10.244.1.5:8080"))
	in := d.nodeport.SocklbFromNetdev
	inNodeLab(t, d, func(lab nodeLab) {
		cli, fe := netip.AddrPortFrom(labClient, 40000), netip.AddrPortFrom(labNode, 30080)
		whole := testPacket{src: cli, dst: fe, proto: protoUDP, payload: bytes.Repeat([]byte("a"), 64)}.bytes()
		if verdict, frame, err := runTC(in, whole, lab.dev0); err != nil || verdict != tcActOK || parsePacket(t, frame).dst == fe {
			t.Errorf("an unfragmented datagram: verdict %d, err %v, not translated; the lab does not serve the NodePort", verdict, err)
			return
		}
		for _, f := range []struct {
			name   string
			more   bool
			offset uint16 // 8-byte units
		}{{"the first fragment", true, 0}, {"a later fragment", true, 9}, {"the last fragment", false, 18}} {
			frag := testPacket{src: cli, dst: fe, proto: protoUDP, payload: bytes.Repeat([]byte("b"), 64)}.bytes()
			setFrag(frag, f.more, f.offset)
			verdict, frame, err := runTC(in, frag, lab.dev0)
			if err != nil {
				t.Errorf("%s: run: %v", f.name, err)
				continue
			}
			if verdict != tcActOK || !bytes.Equal(frame[:len(frag)], frag) {
				t.Errorf("%s: verdict %d, changed %v; want %d and the frame untouched", f.name, verdict, !bytes.Equal(frame[:len(frag)], frag), tcActOK)
			}
		}
	})
}

// setFrag sets an Ethernet+IPv4 frame's MF flag and fragment offset (in
// 8-byte units) and fixes the header checksum.
func setFrag(frame []byte, more bool, offset uint16) {
	ip := frame[14:34]
	v := offset & 0x1fff
	if more {
		v |= 0x2000
	}
	binary.BigEndian.PutUint16(ip[6:], v)
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], csumFold(csumAdd(0, ip)))
}
