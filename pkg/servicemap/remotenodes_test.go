package servicemap

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
)

// TestRemoteNodeAddresses: where kube-proxy on each other node would serve
// NodePorts, as far as the Node objects tell, with this node's
// --nodeport-addresses.
func TestRemoteNodeAddresses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodes    []*corev1.Node
		nodeName string
		local    []string // model.Input.LocalAddresses
		filter   []string // model.Input.NodePortAddresses
		primary  bool
		want     []string
		problems []string // substrings, in order
	}{
		{
			name: "InternalIP and ExternalIP of every other node, sorted, each once; not Hostname, not this node's",
			nodes: []*corev1.Node{
				node("node-a", "zone-a", "InternalIP=10.1.0.5", "ExternalIP=198.51.100.5"),
				node("node-c", "zone-a", "InternalIP=10.1.0.7", "ExternalIP=198.51.100.9", "InternalIP=2001:db8::7"),
				node("node-b", "zone-b", "InternalIP=10.1.0.6", "ExternalIP=198.51.100.9", "Hostname=node-b", "InternalDNS=node-b.local"),
			},
			nodeName: "node-a",
			want:     []string{"10.1.0.6", "10.1.0.7", "198.51.100.9", "2001:db8::7"},
		},
		{
			name: "an address this node also has (on an interface or its Node object) is this node's, not a remote one",
			nodes: []*corev1.Node{
				node("node-a", "zone-a", "InternalIP=10.1.0.5", "ExternalIP=198.51.100.5"),
				node("node-b", "zone-a", "InternalIP=10.1.0.6", "ExternalIP=198.51.100.5", "InternalIP=192.168.7.1"),
			},
			nodeName: "node-a",
			local:    []string{"192.168.7.1", "::ffff:10.1.0.9"},
			want:     []string{"10.1.0.6"},
		},
		{
			name: "before this node's Node object exists: every Node is remote, the interfaces still are this node's",
			nodes: []*corev1.Node{
				node("node-b", "zone-a", "InternalIP=10.1.0.6", "InternalIP=10.1.0.5"),
			},
			nodeName: "node-a",
			local:    []string{"10.1.0.5"},
			want:     []string{"10.1.0.6"},
		},
		{
			name: "a CIDR filter applies to its own family only",
			nodes: []*corev1.Node{
				node("node-a", "zone-a", "InternalIP=10.1.0.5"),
				node("node-b", "zone-a", "InternalIP=10.1.0.6", "ExternalIP=198.51.100.6", "InternalIP=2001:db8::6"),
			},
			nodeName: "node-a",
			filter:   []string{"10.0.0.0/8"},
			want:     []string{"10.1.0.6", "2001:db8::6"},
		},
		{
			name: "a filter that matches nothing of a family: none of that family",
			nodes: []*corev1.Node{
				node("node-b", "zone-a", "InternalIP=10.1.0.6", "InternalIP=2001:db8::6"),
			},
			nodeName: "node-a",
			filter:   []string{"172.16.0.0/12", "fd00::/8"},
		},
		{
			name: "primary: each node's own first InternalIP of each family (else ExternalIP), not this node's primary",
			nodes: []*corev1.Node{
				node("node-a", "zone-a", "InternalIP=10.1.0.5"),
				node("node-b", "zone-a", "ExternalIP=198.51.100.6", "InternalIP=10.1.0.6", "InternalIP=10.2.0.6", "InternalIP=2001:db8::6", "InternalIP=2001:db8::66"),
				node("node-c", "zone-a", "ExternalIP=198.51.100.7", "ExternalIP=198.51.100.77"),
			},
			nodeName: "node-a",
			primary:  true,
			want:     []string{"10.1.0.6", "198.51.100.7", "2001:db8::6"},
		},
		{
			name: "primary with a CIDR: the node's primary address and what the CIDR holds; a family without either is not filtered",
			nodes: []*corev1.Node{
				node("node-b", "zone-a", "InternalIP=10.1.0.6", "InternalIP=10.2.0.6", "ExternalIP=198.51.100.6"),
				node("node-c", "zone-a", "ExternalIP=2001:db8::7", "ExternalIP=2001:db8::77"),
			},
			nodeName: "node-a",
			primary:  true,
			filter:   []string{"198.51.100.0/24"},
			want:     []string{"10.1.0.6", "198.51.100.6", "2001:db8::7"},
		},
		{
			name: "loopback, link-local, multicast, unspecified, broadcast and zoned addresses are dropped; a mapped one is its IPv4 address",
			nodes: []*corev1.Node{
				node("node-b", "zone-a", "InternalIP=127.0.0.1", "InternalIP=::1", "InternalIP=169.254.1.1", "InternalIP=fe80::1",
					"InternalIP=224.0.0.1", "InternalIP=0.0.0.0", "InternalIP=::", "InternalIP=255.255.255.255",
					"InternalIP=fd00::6%eth0", "ExternalIP=::ffff:198.51.100.6"),
			},
			nodeName: "node-a",
			want:     []string{"198.51.100.6"},
		},
		{
			name: "an unparsable address is a problem naming the Node and the field; its other addresses are used",
			nodes: []*corev1.Node{
				node("node-b", "zone-a", "InternalIP=10.1.0.600", "InternalIP=10.1.0.6"),
				node("node-a", "zone-a", "InternalIP=bad"),
			},
			nodeName: "node-a",
			want:     []string{"10.1.0.6"},
			problems: []string{`Node node-b: status.addresses[0] (InternalIP) "10.1.0.600" is not an IP address`},
		},
		{
			name:     "no other node: nothing",
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=10.1.0.5"), nil},
			nodeName: "node-a",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := model.Input{Nodes: tc.nodes, NodeName: tc.nodeName, NodePortPrimary: tc.primary}
			for _, a := range tc.local {
				in.LocalAddresses = append(in.LocalAddresses, netip.MustParseAddr(a))
			}
			for _, p := range tc.filter {
				in.NodePortAddresses = append(in.NodePortAddresses, netip.MustParsePrefix(p))
			}
			got, ps := RemoteNodeAddresses(in)
			var gotS []string
			for _, a := range got {
				gotS = append(gotS, a.String())
			}
			if !slices.Equal(gotS, tc.want) {
				t.Errorf("addresses:\n got %q\nwant %q", gotS, tc.want)
			}
			rp := renderProblems(ps)
			ok := len(rp) == len(tc.problems)
			for i := 0; ok && i < len(rp); i++ {
				ok = strings.Contains(rp[i], tc.problems[i])
			}
			if !ok {
				t.Errorf("problems:\n got %q\nwant %q", rp, tc.problems)
			}
		})
	}
}
