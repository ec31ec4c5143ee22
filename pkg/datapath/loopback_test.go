package datapath

import (
	"net/netip"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestLocalhostNodePortOnlyInHostNetns: kube-proxy's localhost NodePorts
// (route_localnet; --dst-type LOCAL matches all of 127.0.0.0/8) live in the
// host's network namespace. From the host, any 127.x.y.z:<nodePort> reaches
// the Service; from a pod, 127.0.0.1:<nodePort> is the pod's own loopback
// and is left alone.
func TestLocalhostNodePortOnlyInHostNetns(t *testing.T) {
	const host, pod = 1000, 2000
	d := openTest(t, Config{})
	p := testProgsWith(t, d, map[string]any{"host_netns_cookie": uint64(host)})
	fe := frontend("127.0.0.1", 30080, servicemap.TCP, "10.244.1.11:8080")
	fe.Kind = servicemap.KindNodePort
	six := frontend("::1", 30080, servicemap.TCP, "[fd00::11]:8080")
	six.Kind = servicemap.KindNodePort
	mustApply(t, d, state(fe, six))

	for _, tc := range []struct {
		dst    string
		client uint64
		want   string // "" = left alone
	}{
		{"127.0.0.1:30080", host, "10.244.1.11:8080"},
		{"127.0.0.5:30080", host, "10.244.1.11:8080"},
		{"127.255.255.254:30080", host, "10.244.1.11:8080"},
		{"[::1]:30080", host, "[fd00::11]:8080"},
		{"127.0.0.1:30080", pod, ""},
		{"127.0.0.5:30080", pod, ""},
		{"[::1]:30080", pod, ""},
		{"127.0.0.1:30081", host, ""},
		{"128.0.0.1:30080", host, ""},
	} {
		dst := netip.MustParseAddrPort(tc.dst)
		r := runFrom(t, p.TestTranslateConnect, dst, servicemap.TCP, 1, tc.client)
		if tc.want == "" && (r.verdict != verdictPass || r.addrPort != dst) {
			t.Errorf("%s from netns %d: verdict %d -> %s, want it left alone", dst, tc.client, r.verdict, r.addrPort)
		}
		if tc.want != "" && (r.verdict != verdictXlated || r.addrPort.String() != tc.want) {
			t.Errorf("%s from netns %d: verdict %d -> %s, want %s", dst, tc.client, r.verdict, r.addrPort, tc.want)
		}
	}
}
