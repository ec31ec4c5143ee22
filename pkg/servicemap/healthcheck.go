package servicemap

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// HealthCheck is one listener of kube-proxy's service health server
// (pkg/proxy/healthcheck/service_health.go): a LoadBalancer Service with
// externalTrafficPolicy Local gets an HTTP server on its
// spec.healthCheckNodePort that tells load balancers whether this node has
// a ready endpoint of it. kube-proxy runs one proxier, so one health
// server, per IP family, each counting its own family's endpoints; so is
// a HealthCheck.
type HealthCheck struct {
	Service types.NamespacedName
	IPv6    bool
	Port    uint16
	// Addrs is where to listen: the unspecified address of the family
	// when --nodeport-addresses does not filter it, else this node's
	// interface addresses inside the filter (kube-proxy's GetNodeIPs).
	Addrs []netip.Addr
	// LocalEndpoints counts the distinct IPs of this node's ready
	// endpoints (EndpointsMap.LocalReadyEndpoints): terminating ones do
	// not count, so the load balancer drains a node whose pods are going.
	LocalEndpoints int
}

// HealthChecks lists the health check listeners of the Services in, in
// namespace/name then family order. It reads the objects as Build does,
// and reports nothing: Build reports what is wrong with them.
func HealthChecks(in model.Input) []HealthCheck {
	// Most clusters have none: skip indexing every slice at every sync.
	if !slices.ContainsFunc(in.Services, func(s *corev1.Service) bool { return s != nil && needsHealthCheck(s) }) {
		return nil
	}
	b := &builder{node: nodeFromInput(in)}
	bySvc := b.indexSlices(in.Slices)
	filter := healthCheckFilter(in)
	var out []HealthCheck
	seen := map[types.NamespacedName]bool{}
	for _, svc := range in.Services {
		if svc == nil {
			continue
		}
		nn := nnOf(svc.Namespace, svc.Name)
		if seen[nn] || !needsHealthCheck(svc) {
			continue
		}
		seen[nn] = true
		out = append(out, b.healthChecksOf(svc, bySvc[nn], filter, in.LocalAddresses)...)
	}
	slices.SortFunc(out, compareHealthCheck)
	return out
}

func healthCheckFilter(in model.Input) []netip.Prefix {
	filter := in.NodePortAddresses
	if in.NodePortPrimary {
		filter = append(slices.Clip(filter), primaryPrefixes(in.ThisNode())...)
	}
	return filter
}

// healthChecksOf is one Service's listeners; the problems it meets are
// left in b for the caller to drop (Build reports them).
func (b *builder) healthChecksOf(svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice, filter []netip.Prefix, local []netip.Addr) []HealthCheck {
	if !needsHealthCheck(svc) {
		return nil
	}
	nn := nnOf(svc.Namespace, svc.Name)
	vips, ok := b.clusterIPs(nn, &svc.Spec)
	if !ok || len(b.servicePorts(nn, &svc.Spec)) == 0 {
		return nil
	}
	eps := b.parseSlices(svcSlices)
	var out []HealthCheck
	for _, vip := range vips {
		out = append(out, HealthCheck{
			Service:        nn,
			IPv6:           vip.Is6(),
			Port:           uint16(svc.Spec.HealthCheckNodePort),
			Addrs:          healthCheckAddrs(filter, local, vip.Is6()),
			LocalEndpoints: localReadyIPs(eps, vip.Is6(), b.node),
		})
	}
	return out
}

func compareHealthCheck(x, y HealthCheck) int {
	if c := compareNN(x.Service, y.Service); c != 0 {
		return c
	}
	if x.IPv6 == y.IPv6 {
		return 0
	}
	if !x.IPv6 {
		return -1
	}
	return 1
}

// needsHealthCheck is kube-proxy's NeedsHealthCheck (pkg/api/v1/service)
// with newBaseServiceInfo's port check (pkg/proxy/serviceport.go): a
// LoadBalancer with externalTrafficPolicy Local and a healthCheckNodePort.
// Services kube-proxy does not proxy have none.
func needsHealthCheck(svc *corev1.Service) bool {
	if _, other := svc.Labels[model.LabelServiceProxyName]; other {
		return false
	}
	p := svc.Spec.HealthCheckNodePort
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		p > 0 && p <= 65535
}

// healthCheckAddrs is newServiceHealthServer's choice of listen addresses
// for one family. Link-local addresses are left out: they cannot be bound
// without their interface's zone, which the list does not carry.
func healthCheckAddrs(filter []netip.Prefix, local []netip.Addr, is6 bool) []netip.Addr {
	var fam []netip.Prefix
	for _, p := range filter {
		if p.IsValid() && p.Addr().Is6() == is6 {
			if p.Bits() == 0 {
				fam = nil // a zero CIDR matches everything (MatchAll)
				break
			}
			fam = append(fam, p)
		}
	}
	if len(fam) == 0 {
		if is6 {
			return []netip.Addr{netip.IPv6Unspecified()}
		}
		return []netip.Addr{netip.IPv4Unspecified()}
	}
	var out []netip.Addr
	for _, a := range local {
		a = a.Unmap()
		if a.Zone() != "" || a.IsLinkLocalUnicast() {
			continue
		}
		if slices.ContainsFunc(fam, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// localReadyIPs counts the distinct IPs of this node's ready endpoints of
// one family, over every port of the slices (kube-proxy's
// getLocalReadyEndpointIPs reads the whole EndpointsMap of the Service),
// each ip:port's copies resolved as for frontends.
func localReadyIPs(eps []parsedSlice, is6 bool, node nodeInfo) int {
	var ports []servicePort
	for _, s := range eps {
		if s.is6 != is6 {
			continue
		}
		for _, p := range s.ports {
			sp := servicePort{name: p.name, proto: p.proto}
			if !slices.Contains(ports, sp) {
				ports = append(ports, sp)
			}
		}
	}
	ips := map[netip.Addr]bool{}
	for _, sp := range ports {
		for _, e := range candidateEndpoints(eps, is6, sp, node) {
			if e.ready && e.isLocal(node) {
				ips[e.addr] = true
			}
		}
	}
	return len(ips)
}
