package datapath

import (
	"encoding/binary"
	"net/netip"
)

// The maps hold every address as 16 bytes, IPv4 as IPv4-mapped, the form
// the BPF side builds from a socket's destination.
func addrBytes(a netip.Addr) [16]byte { return a.As16() }

func addrFromBytes(b [16]byte) netip.Addr { return netip.AddrFrom16(b).Unmap() }

// Ports are stored as the kernel hands them to sock_addr programs: network
// byte order in a host-order integer.
func portToMap(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

func portFromMap(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}
