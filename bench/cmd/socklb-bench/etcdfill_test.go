package main

import (
	"net/netip"
	"testing"
)

// Fillers written into etcd bypass the API server's allocator: their
// ClusterIPs must not repeat, nor take one the API server handed out.
func TestFillerVIPsSkipTakenAndNeverRepeat(t *testing.T) {
	taken := []string{"10.104.0.3", "10.104.0.4", "10.96.0.10", "10.104.0.9"}
	off := takenOffsets(taken...)
	seen := map[netip.Addr]bool{}
	for _, s := range taken {
		seen[netip.MustParseAddr(s)] = true
	}
	for i := 0; i < 1000; i++ {
		ip := fillerVIP(i, off)
		if seen[ip] {
			t.Fatalf("filler %d got %s, taken or used before", i, ip)
		}
		seen[ip] = true
	}
	if got := fillerVIP(0, off); got != netip.MustParseAddr("10.104.0.1") {
		t.Errorf("filler 0: %s, want 10.104.0.1", got)
	}
}
