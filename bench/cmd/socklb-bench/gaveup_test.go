package main

import (
	"testing"
	"time"
)

func TestGaveUpKeepsTheSmallestSize(t *testing.T) {
	g := gaveUp{}
	if got := g.note("iptables", 5*time.Minute); got != "" {
		t.Fatalf("note before any timeout = %q, want none: the dataplane must be attempted", got)
	}
	g.record("iptables", 10000)
	g.record("iptables", 30000)
	want := "not attempted: did not sync within 5m0s at N=10000"
	if got := g.note("iptables", 5*time.Minute); got != want {
		t.Errorf("note = %q, want %q", got, want)
	}
	if got := g.note("nftables", 5*time.Minute); got != "" {
		t.Errorf("nftables never timed out but is noted %q", got)
	}
}
