package main

import (
	"strings"
	"testing"
)

// TestHostDiff: a changed rule count or sysctl is reported, an unchanged
// state is not.
func TestHostDiff(t *testing.T) {
	before := hostState{rules: map[string]int{"iptables-save": 0, "nft list ruleset": 0},
		sysctls: map[string]string{"net/ipv4/conf/all/route_localnet": "0"}}
	if d := before.diff(before); len(d) != 0 {
		t.Errorf("no change, diff %v", d)
	}
	after := hostState{rules: map[string]int{"iptables-save": 12, "nft list ruleset": 0},
		sysctls: map[string]string{"net/ipv4/conf/all/route_localnet": "1"}}
	d := strings.Join(before.diff(after), "; ")
	for _, want := range []string{"`iptables-save`: 0 lines before, 12 after", "route_localnet: 0 before, 1 after"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff %q lacks %q", d, want)
		}
	}
	if strings.Contains(d, "nft") {
		t.Errorf("diff %q names an unchanged rule set", d)
	}
}
