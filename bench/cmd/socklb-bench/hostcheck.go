package main

// The host namespace's netfilter rules and the sysctls kube-proxy may
// write, read before and after a run: kube-proxy runs only inside lab
// namespaces, and a run that changed the host is reported as such (its
// raw file says so and the harness exits with an error).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// hostSysctls are the host's sysctls kube-proxy (or the labs) could
// touch: kube-proxy's iptables mode sets route_localnet for localhost
// NodePorts, and its conntrack flags the conntrack ones; the labs set
// forwarding and rp_filter in their own namespaces.
var hostSysctls = []string{
	"net/ipv4/conf/all/route_localnet",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/rp_filter",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"net/netfilter/nf_conntrack_udp_timeout",
	"net/netfilter/nf_conntrack_udp_timeout_stream",
	"net/netfilter/nf_conntrack_tcp_be_liberal",
}

// hostState is what hostSnapshot read in the harness's (the host's)
// network namespace.
type hostState struct {
	rules   map[string]int    // command -> lines of output
	sysctls map[string]string // path under /proc/sys -> value ("absent")
}

// hostSnapshot reads the host namespace's rule sets (line counts of
// iptables-save, ip6tables-save and nft list ruleset) and hostSysctls.
// The harness runs in the host namespace; /proc/sys/net answers for the
// namespace of the thread that reads it, and no goroutine runs on a
// thread left in another namespace (lab.InNetNS restores it).
func hostSnapshot() (hostState, error) {
	st := hostState{rules: map[string]int{}, sysctls: map[string]string{}}
	for _, c := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		if _, err := exec.LookPath(c[0]); err != nil {
			continue
		}
		out, err := exec.Command(c[0], c[1:]...).Output()
		if err != nil {
			return st, fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
		st.rules[strings.Join(c, " ")] = strings.Count(string(out), "\n")
	}
	for _, k := range hostSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			st.sysctls[k] = "absent"
			continue
		}
		st.sysctls[k] = strings.TrimSpace(string(b))
	}
	return st, nil
}

// diff lists what changed from st to after; empty when nothing did.
func (st hostState) diff(after hostState) []string {
	var out []string
	for _, k := range slices.Sorted(mapKeys(st.rules, after.rules)) {
		if st.rules[k] != after.rules[k] {
			out = append(out, fmt.Sprintf("`%s`: %d lines before, %d after", k, st.rules[k], after.rules[k]))
		}
	}
	for _, k := range slices.Sorted(mapKeys(st.sysctls, after.sysctls)) {
		if st.sysctls[k] != after.sysctls[k] {
			out = append(out, fmt.Sprintf("%s: %s before, %s after", k, st.sysctls[k], after.sysctls[k]))
		}
	}
	return out
}

// String is the state in one line, for the raw file's machine facts.
func (st hostState) String() string {
	var parts []string
	for _, k := range slices.Sorted(mapKeys(st.rules)) {
		parts = append(parts, fmt.Sprintf("`%s | wc -l` %d", k, st.rules[k]))
	}
	for _, k := range slices.Sorted(mapKeys(st.sysctls)) {
		parts = append(parts, fmt.Sprintf("%s=%s", strings.ReplaceAll(k, "/", "."), st.sysctls[k]))
	}
	return strings.Join(parts, ", ")
}

func mapKeys[V any](ms ...map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}
