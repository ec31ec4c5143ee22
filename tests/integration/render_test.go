package integration

import (
	"fmt"
	"strings"
)

// svcSpec is the part of a Service the parity tests vary. Ports are always
// tcp 80 -> 8080 and dns 53/UDP -> 5353, as the lab's servers listen.
type svcSpec struct {
	name        string
	clusterIPs  []string // first is spec.clusterIP; an IPv6 one makes the Service dual-stack
	typ         string   // ClusterIP (default), NodePort, LoadBalancer
	nodePort    int      // for the tcp port
	udpNodePort int      // for the udp port
	srcRanges   []string // spec.loadBalancerSourceRanges
	externalIPs []string
	lbIngress   []string
	affinity    bool
	itp, etp    string // internal/externalTrafficPolicy
	labels      string // extra metadata.labels of the Service, as YAML flow entries
	sliceLabels string // extra labels of its EndpointSlices
	hcNodePort  int    // spec.healthCheckNodePort
}

type ep struct {
	ip                          string
	node                        string
	ready, serving, terminating bool
	zone                        string // hints.forZones, when set
}

func readyEP(ip, node string) ep { return ep{ip: ip, node: node, ready: true, serving: true} }

func (s svcSpec) yaml(eps ...ep) string {
	var b strings.Builder
	typ := s.typ
	if typ == "" {
		typ = "ClusterIP"
	}
	fam := []string{}
	for _, ip := range s.clusterIPs {
		if strings.Contains(ip, ":") {
			fam = append(fam, "IPv6")
		} else {
			fam = append(fam, "IPv4")
		}
	}
	labels := ""
	if s.labels != "" {
		labels = ", labels: {" + s.labels + "}"
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default%s}\nspec:\n", s.name, labels)
	fmt.Fprintf(&b, "  type: %s\n  clusterIP: %s\n  clusterIPs: [%s]\n  ipFamilies: [%s]\n", typ, s.clusterIPs[0], strings.Join(s.clusterIPs, ", "), strings.Join(fam, ", "))
	if len(fam) > 1 {
		b.WriteString("  ipFamilyPolicy: PreferDualStack\n")
	}
	np := ""
	if s.nodePort != 0 {
		np = fmt.Sprintf(", nodePort: %d", s.nodePort)
	}
	unp := ""
	if s.udpNodePort != 0 {
		unp = fmt.Sprintf(", nodePort: %d", s.udpNodePort)
	}
	fmt.Fprintf(&b, "  ports:\n  - {name: tcp, port: 80, targetPort: 8080, protocol: TCP%s}\n  - {name: dns, port: 53, targetPort: 5353, protocol: UDP%s}\n", np, unp)
	if len(s.srcRanges) > 0 {
		fmt.Fprintf(&b, "  loadBalancerSourceRanges: [%s]\n", strings.Join(s.srcRanges, ", "))
	}
	if len(s.externalIPs) > 0 {
		fmt.Fprintf(&b, "  externalIPs: [%s]\n", strings.Join(s.externalIPs, ", "))
	}
	if s.affinity {
		b.WriteString("  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 10800}}\n")
	}
	if s.itp != "" {
		fmt.Fprintf(&b, "  internalTrafficPolicy: %s\n", s.itp)
	}
	if s.etp != "" {
		fmt.Fprintf(&b, "  externalTrafficPolicy: %s\n", s.etp)
	}
	if s.hcNodePort != 0 {
		fmt.Fprintf(&b, "  healthCheckNodePort: %d\n", s.hcNodePort)
	}
	if len(s.lbIngress) > 0 {
		b.WriteString("status:\n  loadBalancer:\n    ingress:\n")
		for _, ip := range s.lbIngress {
			fmt.Fprintf(&b, "    - {ip: %s}\n", ip)
		}
	}
	sliceLabels := ""
	if s.sliceLabels != "" {
		sliceLabels = ", " + s.sliceLabels
	}
	for _, family := range fam {
		var these []ep
		for _, e := range eps {
			if strings.Contains(e.ip, ":") == (family == "IPv6") {
				these = append(these, e)
			}
		}
		fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-%s\n  namespace: default\n  labels: {kubernetes.io/service-name: %s%s}\n", s.name, strings.ToLower(family), s.name, sliceLabels)
		fmt.Fprintf(&b, "addressType: %s\nports:\n- {name: tcp, port: 8080, protocol: TCP}\n- {name: dns, port: 5353, protocol: UDP}\n", family)
		if len(these) == 0 {
			b.WriteString("endpoints: []\n")
			continue
		}
		b.WriteString("endpoints:\n")
		for _, e := range these {
			fmt.Fprintf(&b, "- addresses: [\"%s\"]\n  nodeName: %s\n  conditions: {ready: %t, serving: %t, terminating: %t}\n", e.ip, e.node, e.ready, e.serving, e.terminating)
			if e.zone != "" {
				fmt.Fprintf(&b, "  hints: {forZones: [{name: %s}]}\n", e.zone)
			}
		}
	}
	return b.String()
}

// nodeYAML is this node's Node object, with an InternalIP for NodePorts.
func nodeYAML(name, internalIP, zone string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  labels: {topology.kubernetes.io/zone: %s}
status:
  addresses:
  - {type: InternalIP, address: %s}
`, name, zone, internalIP)
}
