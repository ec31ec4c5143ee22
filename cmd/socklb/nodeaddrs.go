package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// withNodeAddresses adds what servicemap needs for NodePorts and the
// source does not know: this node's interface addresses and the
// --nodeport-addresses filter. Interfaces are read at every snapshot, so a
// new address is picked up with the next API change.
type withNodeAddresses struct {
	source.Source
	filter          nodePortFlag
	externalIPCIDRs []netip.Prefix
	log             *slog.Logger
}

// wrapNodeAddresses wraps base, keeping it a source.Tracked if it is one.
func wrapNodeAddresses(s withNodeAddresses) source.Source {
	if t, ok := s.Source.(source.Tracked); ok {
		return trackedWithNodeAddresses{withNodeAddresses: s, t: t}
	}
	return s
}

func (s withNodeAddresses) Snapshot() servicemap.Input {
	in := s.Source.Snapshot()
	s.addFacts(&in)
	return in
}

func (s withNodeAddresses) addFacts(in *servicemap.Input) {
	addrs, err := datapath.LocalAddresses()
	if err != nil {
		s.log.Warn("NodePorts are served on the Node object's addresses only", "err", err)
	}
	in.LocalAddresses = addrs
	in.NodePortAddresses = s.filter.prefixes
	in.NodePortPrimary = s.filter.primary
	in.ExternalIPCIDRs = s.externalIPCIDRs
}

type trackedWithNodeAddresses struct {
	withNodeAddresses
	t source.Tracked
}

func (s trackedWithNodeAddresses) Checkout() source.Changes { return s.t.Checkout() }
func (s trackedWithNodeAddresses) Pending() (int, int)      { return s.t.Pending() }
func (s trackedWithNodeAddresses) ServiceObjects(nn types.NamespacedName) servicemap.ServiceObjects {
	return s.t.ServiceObjects(nn)
}

// NodeInput reads the interfaces at every sync, so an address change
// reaches servicemap as a node change (every Service rebuilt).
func (s trackedWithNodeAddresses) NodeInput() servicemap.Input {
	in := s.t.NodeInput()
	s.addFacts(&in)
	return in
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
