package model

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
)

// AddrSet is a sorted set of addresses that carries a digest of them, so
// that whoever keeps a set between syncs tells whether it changed at a
// cost that does not grow with it: the other Nodes' addresses run to
// 10 000 in a 5 000-node cluster, and servicemap's Tracker compares the
// node facts at every Service change. Make one with NewAddrSet; the zero
// AddrSet is empty.
type AddrSet struct {
	addrs []netip.Addr
	sum   [sha256.Size]byte
}

// NewAddrSet is the set of addrs, which it sorts and deduplicates in
// place. It hashes every address: make a set when the addresses change,
// not every time it is read. SHA-256 rather than a cheaper hash because
// Node objects choose the addresses: no two sets anyone can make share a
// digest, so a changed set is never taken for the old one.
func NewAddrSet(addrs []netip.Addr) AddrSet {
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		return AddrSet{} // equal to the zero set, digest included
	}
	s := AddrSet{addrs: slices.Clip(addrs)}
	h := sha256.New()
	var buf []byte
	for _, a := range addrs {
		// Fixed-width fields and a length before the zone: no two lists
		// encode to the same bytes.
		b16 := a.As16()
		buf = append(buf[:0], byte(a.BitLen()))
		buf = append(buf, b16[:]...)
		buf = binary.AppendUvarint(buf, uint64(len(a.Zone())))
		buf = append(buf, a.Zone()...)
		h.Write(buf)
	}
	h.Sum(s.sum[:0])
	return s
}

// Addrs is the set's addresses, sorted; the caller must not modify them.
func (s AddrSet) Addrs() []netip.Addr { return s.addrs }

// Contains reports whether a is in the set.
func (s AddrSet) Contains(a netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(s.addrs, a, netip.Addr.Compare)
	return ok
}

// Sum is the digest of the set: two sets are equal when their sums are.
// The empty set's is all zeros.
func (s AddrSet) Sum() [sha256.Size]byte { return s.sum }
