package model

import (
	"net/netip"
	"testing"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

// TestAddrSetSum: the digest is the set's, whatever the order and
// repeats it was made from, and any change of the set changes it; an
// empty set is the zero set.
func TestAddrSetSum(t *testing.T) {
	base := NewAddrSet(addrs("192.0.2.7", "2001:db8::7", "192.0.2.8"))
	if same := NewAddrSet(addrs("192.0.2.8", "2001:db8::7", "192.0.2.7", "192.0.2.8")); same.Sum() != base.Sum() {
		t.Errorf("order or a repeat changed the digest")
	}
	for _, other := range [][]netip.Addr{
		addrs("192.0.2.7", "2001:db8::7"),
		addrs("192.0.2.7", "2001:db8::7", "192.0.2.9"),
		addrs("192.0.2.7", "2001:db8::7", "192.0.2.8", "192.0.2.9"),
		addrs("192.0.2.7", "::ffff:192.0.2.8", "2001:db8::7"), // mapped is not plain IPv4
		addrs("192.0.2.7", "2001:db8::7%eth0", "192.0.2.8"),
	} {
		if NewAddrSet(other).Sum() == base.Sum() {
			t.Errorf("%v has the digest of %v", other, base.Addrs())
		}
	}
	if NewAddrSet(nil).Sum() != (AddrSet{}).Sum() || NewAddrSet([]netip.Addr{}).Addrs() != nil {
		t.Errorf("an empty set differs from the zero set")
	}
	if !base.Contains(netip.MustParseAddr("192.0.2.8")) || base.Contains(netip.MustParseAddr("192.0.2.9")) || (AddrSet{}).Contains(netip.MustParseAddr("192.0.2.8")) {
		t.Errorf("Contains is wrong over %v", base.Addrs())
	}
}
