package integration

import (
	"fmt"
	"strings"
)

type endpoint struct {
	ip    string
	ready bool
}

// serviceYAML renders a ClusterIP Service with a TCP port 80 -> 8080 named
// "tcp" and a UDP port 53 -> 5353 named "dns", and one EndpointSlice.
func serviceYAML(name, clusterIP string, eps ...endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: default}
spec:
  clusterIP: %[2]s
  clusterIPs: [%[2]s]
  ports:
  - {name: tcp, port: 80, targetPort: 8080, protocol: TCP}
  - {name: dns, port: 53, targetPort: 5353, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-abc
  namespace: default
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports:
- {name: tcp, port: 8080, protocol: TCP}
- {name: dns, port: 5353, protocol: UDP}
`, name, clusterIP)
	if len(eps) == 0 {
		b.WriteString("endpoints: []\n")
	} else {
		b.WriteString("endpoints:\n")
	}
	for _, ep := range eps {
		fmt.Fprintf(&b, "- addresses: [%s]\n  conditions: {ready: %t}\n  nodeName: node-a\n", ep.ip, ep.ready)
	}
	return b.String()
}

func ready(ips ...string) []endpoint {
	out := make([]endpoint, len(ips))
	for i, ip := range ips {
		out[i] = endpoint{ip: ip, ready: true}
	}
	return out
}
