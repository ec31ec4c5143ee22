package datapath

import (
	"fmt"
	"net/netip"
	"slices"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// loadBalancerSourceRanges live in src_ranges, an LPM trie keyed by the
// frontend's svc id and the prefix (IPv4 as v4-mapped), so one lookup of
// {svc id, source} finds whether any range holds the source. The service
// entry's SVC_F_SRC_RANGES tells the programs to look.

func rangeKey(svcID uint32, p netip.Prefix) socklbbpf.SocklbSrcRangeKey {
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	// The id in the programs' byte order: every key covers all its 32
	// bits, so only the address bits are a prefix.
	return socklbbpf.SocklbSrcRangeKey{Prefixlen: uint32(32 + bits), SvcId: svcID, Addr: addrBytes(p.Masked().Addr())}
}

// addRanges writes the ranges of want that have is missing; dropRanges
// removes the ones of had that want lacks. Added before a service entry
// points at them, dropped after it stops: a reader never finds a frontend
// flagged with ranges it cannot see.
func (d *Datapath) addRanges(id uint32, had, want []netip.Prefix) error {
	for _, p := range want {
		if slices.Contains(had, p) {
			continue
		}
		k := rangeKey(id, p)
		if err := put(func() error { return d.t.srcRanges.Put(k, uint8(1)) }); err != nil {
			return mapErr(socklbbpf.SocklbMapSrcRanges, err)
		}
	}
	return nil
}

func (d *Datapath) dropRanges(id uint32, had, want []netip.Prefix) {
	for _, p := range had {
		if !slices.Contains(want, p) {
			_ = d.t.srcRanges.Delete(rangeKey(id, p))
		}
	}
}

// readRanges reads every frontend's ranges back, by svc id.
func readRanges(t tables) (map[uint32][]netip.Prefix, error) {
	out := map[uint32][]netip.Prefix{}
	var k socklbbpf.SocklbSrcRangeKey
	var v uint8
	it := t.srcRanges.Iterate()
	for it.Next(&k, &v) {
		a := addrFromBytes(k.Addr)
		bits := int(k.Prefixlen) - 32
		if a.Is4() {
			bits -= 96
		}
		out[k.SvcId] = append(out[k.SvcId], netip.PrefixFrom(a, bits))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading src_ranges: %w", err)
	}
	// In servicemap's order, so a Frontend read back compares Equal.
	for id := range out {
		slices.SortFunc(out[id], netip.Prefix.Compare)
	}
	return out, nil
}
