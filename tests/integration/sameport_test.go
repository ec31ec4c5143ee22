package integration

import (
	"testing"
	"time"
)

// TestSamePortTCPAndUDP: a Service whose port 80 is both TCP and UDP
// (upstream's "should serve endpoints on same port and different
// protocols") answers on both, each protocol on its own target port, from
// a connected UDP socket as from TCP.
func TestSamePortTCPAndUDP(t *testing.T) {
	svc := `apiVersion: v1
kind: Service
metadata: {name: both, namespace: default}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.90
  clusterIPs: [10.96.0.90]
  ports:
  - {name: tcp-port, port: 80, targetPort: 8080, protocol: TCP}
  - {name: udp-port, port: 80, targetPort: 5353, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: both-1, namespace: default, labels: {kubernetes.io/service-name: both}}
addressType: IPv4
ports:
- {name: tcp-port, port: 8080, protocol: TCP}
- {name: udp-port, port: 5353, protocol: UDP}
endpoints:
- addresses: ["10.244.1.11"]
  conditions: {ready: true}
`
	e := startWith(t, threePods, map[string]string{"both.yaml": svc})
	e.waitInspect(10*time.Second, "10.96.0.90:80/TCP", "10.96.0.90:80/UDP")
	if res := tcpN(t, e, e.client(), "10.96.0.90:80", 5); res.OK != 5 {
		t.Errorf("TCP: %v errors %v", res.Replies, res.Errors)
	}
	res, err := e.client().UDPConnected(e.ctx(), e.cg, "10.96.0.90:80", 5)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 5 {
		t.Errorf("connected UDP: %v errors %v (first: %s)", res.Replies, res.Errors, res.FirstError)
	}
	udp, err := e.client().UDP(e.ctx(), e.cg, "10.96.0.90:80", 5)
	if err != nil {
		t.Fatal(err)
	}
	if udp.OK != 5 {
		t.Errorf("unconnected UDP: %v errors %v", udp.Replies, udp.Errors)
	}
}
