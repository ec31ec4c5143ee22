package main

import (
	"fmt"
	"time"
)

// gaveUp remembers the smallest N at which each dataplane did not sync
// within --sync-timeout. A dataplane that could not program N Services in
// time will not program more in the same time, and kube-proxy iptables at
// 100 000 Services would only spend the timeout again (and a CPU beside
// the others), so larger sizes record it as not attempted instead.
type gaveUp map[string]int

// note is why dp is not attempted at a larger size, or "" when it is.
func (g gaveUp) note(dp string, timeout time.Duration) string {
	n, ok := g[dp]
	if !ok {
		return ""
	}
	return fmt.Sprintf("not attempted: did not sync within %s at N=%d", timeout, n)
}

// record keeps the first (smallest) size at which dp did not sync.
func (g gaveUp) record(dp string, n int) {
	if _, ok := g[dp]; !ok {
		g[dp] = n
	}
}
