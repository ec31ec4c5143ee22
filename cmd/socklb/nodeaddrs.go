package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parsePortRange reads --nat-port-range: "first-last", both 1024-65535.
func parsePortRange(v string) (uint16, uint16, error) {
	first, last, ok := strings.Cut(strings.TrimSpace(v), "-")
	lo, err1 := strconv.ParseUint(strings.TrimSpace(first), 10, 16)
	hi, err2 := strconv.ParseUint(strings.TrimSpace(last), 10, 16)
	if !ok || err1 != nil || err2 != nil || lo < 1024 || lo > hi {
		return 0, 0, fmt.Errorf("--nat-port-range=%q: want first-last with 1024 <= first <= last <= 65535, e.g. 61000-65535", v)
	}
	return uint16(lo), uint16(hi), nil
}

// parseExternalIPCIDRs reads --external-ip-cidrs: a comma separated list
// of CIDRs, without keywords (an allowlist of "all" would undo the rule
// it widens; 0.0.0.0/0 says so explicitly).
func parseExternalIPCIDRs(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("--external-ip-cidrs: %q is not a CIDR (e.g. 203.0.113.0/24,2001:db8::/64): %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// nodePortFlag is --nodeport-addresses as kube-proxy v1.37 reads it.
type nodePortFlag struct {
	prefixes []netip.Prefix
	primary  bool
}

// parseNodePortAddresses reads kube-proxy's --nodeport-addresses: a comma
// separated list of CIDRs and the keywords kube-proxy accepts
// (validateKubeProxyNodePortAddress in pkg/proxy/apis/config/validation,
// each keyword at most once) and expands (expandNodePortAddressKeywords in
// cmd/kube-proxy/app/server.go): "localhost" is 127.0.0.0/8 and ::1/128,
// "all" is 0.0.0.0/0 and ::/0, "primary" is the node's primary address of
// each family, which only its Node object knows, so servicemap resolves it
// at every build (Input.NodePortPrimary).
func parseNodePortAddresses(v string) (nodePortFlag, error) {
	var out nodePortFlag
	seen := map[string]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
			continue
		case "primary", "localhost", "all":
			if seen[f] {
				return out, fmt.Errorf("--nodeport-addresses: keyword %q appears twice; give it once", f)
			}
			seen[f] = true
		}
		switch f {
		case "primary":
			out.primary = true
		case "localhost":
			out.prefixes = append(out.prefixes, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
		case "all":
			out.prefixes = append(out.prefixes, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
		default:
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return out, fmt.Errorf("--nodeport-addresses: %q is not a CIDR or one of the keywords primary, localhost, all (e.g. primary,10.0.0.0/8,fd00::/64): %w", f, err)
			}
			out.prefixes = append(out.prefixes, p.Masked())
		}
	}
	return out, nil
}
