package lab

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestAddrPlan(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{nodeIPv4(1).String(), "10.250.0.11"},
		{nodeIPv6(2).String(), "fd00:250::12"},
		{podCIDRv4(2).String(), "10.244.2.0/24"},
		{podCIDRv6(2).String(), "fd00:244:2::/64"},
		{podIPv4(2, 1).String(), "10.244.2.11"},
		{podIPv6(2, 1).String(), "fd00:244:2::11"},
		{nodeIPv4(MaxNodes).String(), "10.250.0.99"},
		{podIPv4(MaxNodes, MaxPodsPerNode).String(), "10.244.89.254"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	seen := map[netip.Addr]bool{OutsideIPv4: true, OutsideIPv6: true}
	for i := 1; i <= MaxNodes; i++ {
		for _, a := range []netip.Addr{nodeIPv4(i), nodeIPv6(i)} {
			if seen[a] || !(UnderlayPrefix.Contains(a) || UnderlayPrefixV6.Contains(a)) {
				t.Errorf("node %d: %s repeats or lies off the underlay", i, a)
			}
			seen[a] = true
		}
		for _, j := range []int{1, MaxPodsPerNode} {
			if !podCIDRv4(i).Contains(podIPv4(i, j)) || !podCIDRv6(i).Contains(podIPv6(i, j)) {
				t.Errorf("pod %d of node %d lies off its node's pod CIDR", j, i)
			}
		}
	}
	// Interface names live in the lab's own namespaces, but must still fit
	// IFNAMSIZ (15 bytes and the NUL).
	for _, name := range []string{fmt.Sprintf("vn%d", MaxNodes), fmt.Sprintf("vp%d", MaxPodsPerNode), "vout", underlayBridge, machineDevice} {
		if len(name) > 15 {
			t.Errorf("interface name %q is longer than IFNAMSIZ-1", name)
		}
	}
}
