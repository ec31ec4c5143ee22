package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestBuildNodePortKeywords: --nodeport-addresses keywords as kube-proxy
// v1.37 expands them (expandNodePortAddressKeywords in
// cmd/kube-proxy/app/server.go, then NewNodePortAddresses per family in
// pkg/proxy/util/nodeport_addresses.go). "localhost" and "all" reach
// servicemap as the prefixes the agent's flag parsing makes of them.
func TestBuildNodePortKeywords(t *testing.T) {
	dual := withType(svc("default/web", "10.96.0.10,fd00::10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)
	local := []string{"10.1.0.5", "192.168.1.5", "2001:db8::5", "2001:db8::6"}
	runBuildCases(t, []buildCase{
		{
			name:     "primary: the Node's first InternalIP of each family, and no localhost",
			services: []*corev1.Service{dual},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.168.1.5", "InternalIP=10.1.0.5", "ExternalIP=198.51.100.5", "InternalIP=2001:db8::5")},
			nodeName: "node-a",
			local:    local,
			primary:  true,
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.168.1.5:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "primary: an ExternalIP when the Node has no InternalIP; a family with no address is not filtered",
			services: []*corev1.Service{dual},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "ExternalIP=198.51.100.5")},
			nodeName: "node-a",
			local:    local,
			primary:  true,
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"198.51.100.5:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::6]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "primary mixed with a CIDR: both",
			services: []*corev1.Service{dual},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.168.1.5")},
			nodeName: "node-a",
			local:    local,
			primary:  true,
			filter:   []string{"10.1.0.0/24", "2001:db8::6/128"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.168.1.5:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::6]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "primary mixed with localhost (127.0.0.0/8, ::1/128): the primary addresses and 127.0.0.1; never ::1",
			services: []*corev1.Service{dual},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.168.1.5")},
			nodeName: "node-a",
			local:    append([]string{"::1"}, local...),
			primary:  true,
			filter:   []string{"127.0.0.0/8", "::1/128"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.168.1.5:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "primary before the Node object is known: not filtered, as kube-proxy with loopback node IPs",
			services: []*corev1.Service{nodePortSvc()},
			nodeName: "node-a",
			local:    []string{"10.1.0.5"},
			primary:  true,
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name:     "all (0.0.0.0/0, ::/0): every node address",
			services: []*corev1.Service{dual},
			local:    local,
			filter:   []string{"0.0.0.0/0", "::/0", "10.1.0.0/24"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.168.1.5:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::6]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
	})
}
