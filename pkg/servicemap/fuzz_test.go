package servicemap

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/pkg/model"
)

// FuzzBuild decodes the fuzzer's bytes into Services and EndpointSlices and
// checks that Build never panics, that its output holds the invariants the
// datapath relies on, that it does not write to its input (the agent hands it
// the informer's cache), and that it does not depend on input order.
func FuzzBuild(f *testing.F) {
	// Seeds, in decodeInput's byte order. Each byte picks from a vocabulary
	// below (index = byte mod length); comments say what the bytes decode to.
	f.Add([]byte{})
	f.Add([]byte{ // one ClusterIP Service, one slice with a ready and a terminating endpoint
		1,                               // 1 service
		1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, // default/web, ClusterIP 10.96.0.10, port "http" TCP 80
		1,                                  // 1 slice
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, // default/web-1 for web, IPv4, port "http" TCP
		1,                // 8080
		2,                // 2 endpoints
		1, 0, 1, 1, 2, 1, // 10.0.0.1 ready on node-a
		1, 1, 2, 1, 1, 0, // 10.0.0.2 serving-terminating
		1, 1, // NodeName node-a, with its Node object
	})
	f.Add([]byte{ // dual-stack: IPv4 endpoints all terminating, IPv6 ready
		1,
		1, 0, 0, 0, 0, 0, 2, 0, 1, 1, 1, 0, 0, // clusterIPs 10.96.0.10 and fd00::10
		2,
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 2, 1, 0, 2, 1, 1, 0, 1, 1, 2, 1, 1, 2,
		1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 2, 1, 1, 2, 0, // default/web-2, IPv6, fd00:1::1 ready
		0, 0,
	})
	f.Add([]byte{ // problems: ICMP port, frontend conflict, unlabeled slice, bad and mixed addresses
		2,
		1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 4, 0, // default/web: "http" TCP 80, "" ICMP 80
		1, 0, 2, 0, 0, 0, 0, 1, 0, 0, 0, // default/a on the same 10.96.0.10:80/TCP
		2,
		1, 0, 2, 0, 3, 1, 0, 0, 0, // default/dns-1 without the service-name label
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 2,
		1, 6, 1, 1, 2, 0, // "bad"
		2, 0, 2, 0, 0, 0, 0, // addresses 10.0.0.1 and fd00:1::1, nil conditions
		0, 0,
	})
	f.Add([]byte{ // IPv6 frontend from spec.clusterIP; mapped, zoned, unspecified and valid addresses
		1,
		1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, // default/web, clusterIP fd00::10, port "http" TCP 80
		1,
		1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, // IPv6 slice, port "http" TCP 8080
		4,
		1, 5, 1, 1, 2, 0, // ::ffff:10.0.0.1
		1, 8, 1, 1, 2, 0, // fe80::1%lo
		1, 10, 1, 1, 2, 0, // ::
		1, 3, 1, 1, 2, 0, // fd00:1::2
		0, 0,
	})
	f.Add([]byte{ // raw strings and ports from the input itself
		1,
		1, 0, 0, 0, 0, 200 + 9, '1', '0', '.', '9', '6', '.', '0', '.', '9',
		0, 1, 1, 0, 255, 80, 0, 0, 0, // port "http" TCP 80, as four raw bytes
		1,
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 255, 0x90, 0x1f, 0, 0, // port 8080, raw
		1, 1, 200 + 8, '1', '0', '.', '0', '.', '0', '.', '7', 0, 0, 0, 0,
		0, 0,
	})

	f.Add([]byte{ // NodePort with both policies Local, affinity, externalIPs, LB ingress, hints, node addresses
		1,
		1, 0, 0, 0, 2, 0, 0, 1, 1, 0, 0, // default/web, NodePort, 10.96.0.10, port "http" TCP 80
		1,
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, // default/web-1, IPv4, port "http" TCP 8080
		3,
		1, 0, 1, 1, 2, 1, // 10.0.0.1 ready on node-a
		1, 1, 1, 1, 2, 2, // 10.0.0.2 ready on node-b
		1, 4, 2, 1, 1, 1, // 10.0.0.10 serving-terminating on node-a
		1, 1, // NodeName node-a, with its Node object
		// extras of default/web: ITP Local, ETP Local, ClientIP with the
		// default timeout, PreferSameNode, externalIPs 192.0.2.10 and
		// 10.96.0.10 (its own cluster IP), ingress 203.0.113.7 and
		// 192.0.2.10 in VIP mode, nodePort 30080
		1, 1, 1, 0, 2, 2, 0, 3, 2, 1, 0, 0, 1, 1,
		3, 0, 0, 0, 1, // 10.0.0.1 hinted for zone-a and node-a
		3, 0, 1, 0, 2, // 10.0.0.2 hinted for zone-b and node-b
		1, 0, 0, // 10.0.0.10 hinted for zone-a
		3, 0, 2, 4, // local addresses 10.1.0.5, ::1, 2001:db8::5
		1, 0, // --nodeport-addresses 10.0.0.0/8
		0, 2, 0, 0, 1, 2, // node-a: InternalIP 10.1.0.7, ExternalIP 198.51.100.5
	})
	f.Add([]byte{ // dual-stack LoadBalancer, ITP Local with only a remote endpoint, ipMode Proxy
		1,
		1, 0, 0, 0, 3, 0, 2, 0, 1, 1, 1, 0, 0, // default/web, LoadBalancer, 10.96.0.10 and fd00::10, "http" TCP 80
		1,
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1,
		1,
		1, 0, 1, 1, 2, 2, // 10.0.0.1 ready on node-b
		1, 0, // NodeName node-a, no Node object
		// extras: ITP Local, affinity "Bogus" with timeout 86401,
		// externalIP 2001:db8::10, ingress 203.0.113.7 (Proxy) and
		// 2001:db8::10, no nodePort
		1, 0, 3, 4, 0, 1, 2, 2, 1, 2, 2, 0, 0,
		0,          // no hints
		0, 2, 1, 2, // --nodeport-addresses 127.0.0.0/8, 2001:db8::/64
	})

	f.Add([]byte{ // LoadBalancer, ETP Local, source ranges (one bad), another Node
		1,
		1, 0, 0, 0, 3, 0, 0, 1, 1, 0, 0, // default/web, LoadBalancer, 10.96.0.10, port "http" TCP 80
		1,
		1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, // default/web-1, IPv4, port "http" TCP 8080
		2,
		1, 0, 1, 1, 2, 1, // 10.0.0.1 ready on node-a
		1, 1, 1, 1, 2, 2, // 10.0.0.2 ready on node-b
		1, 1, // NodeName node-a, with its Node object
		// extras of default/web: no ITP, ETP Local, no affinity, no
		// distribution, externalIP 192.0.2.10, ingress 203.0.113.7 (nil
		// mode), nodePort 30080
		0, 1, 0, 0, 1, 0, 1, 1, 0, 1,
		0, 0, // no hints
		1, 0, // local address 10.1.0.5
		0,          // no filter
		0, 1, 0, 0, // node-a: zone-a, InternalIP 10.1.0.7
		0, 0, // not primary, no health check
		2, 1, 3, // source ranges " 10.1.0.0/16" and "bad"
		1, 0, 1, 1, 2, // node-b: ExternalIP 198.51.100.5
	})

	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeInput(data)
		before := deepCopyInput(in)

		st, ps := Build(in)
		checkInvariants(t, in, st, ps)
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("Build modified its input")
		}
		for _, hc := range HealthChecks(in) {
			if hc.Port == 0 || len(hc.Addrs) == 0 && !in.NodePortPrimary && len(in.NodePortAddresses) == 0 || hc.LocalEndpoints < 0 {
				t.Fatalf("health check %+v from %d services", hc, len(in.Services))
			}
		}
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("HealthChecks modified its input")
		}

		// The Tracker's full path is Build too, duplicates included.
		var tr Tracker
		if tst, tps := tr.Full(in); !statesEqual(st, tst) || !slices.Equal(renderProblems(ps), renderProblems(tps)) {
			t.Fatalf("Tracker.Full differs from Build:\n%q\n%q\n%q\n%q", render(st), render(tst), renderProblems(ps), renderProblems(tps))
		}

		// Only duplicate Service names make the result order-dependent
		// (the first copy wins); slices of one name merge either way.
		names := map[string]bool{}
		for _, s := range in.Services {
			if s == nil {
				continue
			}
			if names[s.Namespace+"/"+s.Name] {
				return
			}
			names[s.Namespace+"/"+s.Name] = true
		}
		rev := model.Input{Services: slices.Clone(in.Services), Slices: slices.Clone(in.Slices), Nodes: in.Nodes, NodeName: in.NodeName,
			LocalAddresses: slices.Clone(in.LocalAddresses), NodePortAddresses: slices.Clone(in.NodePortAddresses),
			NodePortPrimary: in.NodePortPrimary, PeerAddresses: in.PeerAddresses}
		slices.Reverse(rev.Services)
		slices.Reverse(rev.Slices)
		slices.Reverse(rev.LocalAddresses)
		slices.Reverse(rev.NodePortAddresses)
		st2, ps2 := Build(rev)
		if !statesEqual(st, st2) {
			t.Fatalf("state depends on input order:\n%q\n%q", render(st), render(st2))
		}
		// Problems of two slices sharing a name may interleave differently.
		p1, p2 := renderProblems(ps), renderProblems(ps2)
		slices.Sort(p1)
		slices.Sort(p2)
		if !slices.Equal(p1, p2) {
			t.Fatalf("problems depend on input order:\n%q\n%q", p1, p2)
		}
	})
}

// Vocabularies hold the values that matter to Build: valid ones, the edge
// cases of each rule, and garbage. raw strings from the input cover the rest.
var (
	fzNamespaces = []string{"default", "kube-system", ""}
	fzNames      = []string{"web", "dns", "a", ""}
	fzSliceNames = []string{"web-1", "web-2", "dns-1", ""}
	fzTypes      = []corev1.ServiceType{corev1.ServiceTypeClusterIP, "", corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName, "Bogus"}
	fzClusterIPs = []string{"10.96.0.10", "fd00::10", "10.96.0.11", "fd00::11", "None", "",
		"not-an-ip", "::ffff:10.96.0.10", "fe80::1%eth0", "10.096.0.1", "0.0.0.0", "::"}
	fzAddrs = []string{"10.0.0.1", "10.0.0.2", "fd00:1::1", "fd00:1::2", "10.0.0.10", "::ffff:10.0.0.1",
		"bad", "", "fe80::1%lo", "1.2.3.4.5", "::", "255.255.255.255"}
	fzPortNames = []string{"", "http", "dns", "HTTP"}
	fzProtocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, "", corev1.ProtocolSCTP, "ICMP", "tcp"}
	fzPorts     = []int32{80, 8080, 53, 0, 65535, 65536, -1, 1}
	fzAddrTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6,
		discoveryv1.AddressTypeFQDN, "", "Bogus"}
	fzLabels = []string{"", model.LabelServiceProxyName, corev1.IsHeadlessService}
	fzNodes  = []string{"", "node-a", "node-b"}

	// The extras, decoded after everything above; index 0 is always
	// "absent", so that seeds written before the extras existed decode
	// as they did.
	fzITPs = []*corev1.ServiceInternalTrafficPolicy{nil, ptr(corev1.ServiceInternalTrafficPolicyLocal),
		ptr(corev1.ServiceInternalTrafficPolicyCluster), ptr(corev1.ServiceInternalTrafficPolicy("Bogus"))}
	fzETPs = []corev1.ServiceExternalTrafficPolicy{"", corev1.ServiceExternalTrafficPolicyLocal,
		corev1.ServiceExternalTrafficPolicyCluster, "Bogus"}
	fzAffinities  = []corev1.ServiceAffinity{"", corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone, "Bogus"}
	fzTimeouts    = []*int32{nil, ptr(int32(60)), ptr(int32(0)), ptr(int32(86400)), ptr(int32(86401)), ptr(int32(-1))}
	fzDists       = []*string{nil, ptr(corev1.ServiceTrafficDistributionPreferSameZone), ptr(corev1.ServiceTrafficDistributionPreferSameNode), ptr(corev1.ServiceTrafficDistributionPreferClose)}
	fzFrontendIPs = []string{"192.0.2.10", "203.0.113.7", "2001:db8::10", "10.96.0.10", "10.1.0.5", "127.0.0.1",
		"239.1.2.3", "bad", "::ffff:192.0.2.10", "fe80::1%eth0", ""}
	fzIPModes   = []*corev1.LoadBalancerIPMode{nil, ptr(corev1.LoadBalancerIPModeVIP), ptr(corev1.LoadBalancerIPModeProxy), ptr(corev1.LoadBalancerIPMode("Bogus"))}
	fzNodePorts = []int32{0, 30080, 30053, 80, 70000, -1}
	fzZones     = []string{"zone-a", "zone-b", ""}
	fzLocal     = []netip.Addr{netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback(),
		netip.MustParseAddr("fe80::1"), netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("::ffff:10.1.0.6"),
		netip.MustParseAddr("224.0.0.1"), netip.IPv4Unspecified(), netip.MustParseAddr("10.96.0.10"),
		netip.MustParseAddr("192.0.2.10"), {}}
	fzPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("2001:db8::/64"), netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("192.0.2.10/32"),
		netip.MustParsePrefix("127.0.0.1/32"), {}}
	fzNodeAddrTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName}
	// 192.0.2.10, the first externalIP, among the small bytes: a Node
	// holding it makes it capturable, so externalIPs follow Node changes.
	fzNodeAddrs = []string{"10.1.0.7", "2001:db8::7", "198.51.100.5", "192.0.2.10", "::1", "10.1.0.5", "bad"}
	// 10.1.0.0/16 holds node addresses above (kube-proxy's allowFromNode).
	fzSourceRanges = []string{"198.51.100.0/24", " 10.1.0.0/16", "2001:db8::/64", "bad", "", "203.0.113.7/32", "::ffff:10.0.0.0/104"}
	fzOtherNodes   = []string{"node-b", "node-c", "node-a"}
	// One Service in four has a healthCheckNodePort (in either byte
	// range: small bytes reach only 32000). It makes a Service read the
	// node's addresses whatever else it holds (readsNodeAddresses), so
	// were most Services to carry one, the Tracker's other reasons to
	// recompute them on an address change (NodePorts, externalIPs, source
	// ranges) would rarely be tested alone.
	fzHealthCheckNodePorts = []int32{0, 0, 0, 32000, 0, 0, 0, 70000, 0, 0, 0, -1}
)

type fuzzReader struct{ data []byte }

func (r *fuzzReader) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *fuzzReader) intn(n int) int { return int(r.next()) % n }

func pick[T any](r *fuzzReader, vs []T) T { return vs[r.intn(len(vs))] }

// str picks from vs, or, for a byte value past the vocabulary, takes a raw
// string from the input so parsers meet bytes nobody thought of.
func (r *fuzzReader) str(vs []string) string {
	b := int(r.next())
	if b < 200 {
		return vs[b%len(vs)]
	}
	n := min(b-200, len(r.data))
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}

func (r *fuzzReader) port() int32 {
	if b := r.next(); b < 200 {
		return fzPorts[int(b)%len(fzPorts)]
	}
	var buf [4]byte
	for i := range buf {
		buf[i] = r.next()
	}
	return int32(binary.LittleEndian.Uint32(buf[:]))
}

func (r *fuzzReader) optBool() *bool {
	switch r.intn(3) {
	case 1:
		return ptr(true)
	case 2:
		return ptr(false)
	}
	return nil
}

func (r *fuzzReader) labels() map[string]string {
	if k := pick(r, fzLabels); k != "" {
		return map[string]string{k: "x"}
	}
	return nil
}

func decodeInput(data []byte) model.Input {
	r := &fuzzReader{data: data}
	var in model.Input
	for range r.intn(4) {
		in.Services = append(in.Services, decodeService(r))
	}
	for range r.intn(5) {
		in.Slices = append(in.Slices, decodeSlice(r))
	}
	in.NodeName = pick(r, fzNodes)
	if r.intn(2) == 1 {
		in.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{
			Name:   in.NodeName,
			Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"},
		}}}
	}
	decodeExtras(r, &in)
	in.PeerAddresses = PeerAddresses(in) // as the agent hands them over
	return in
}

// decodeExtras adds what a Service, an endpoint and the node have beyond
// the ClusterIP basics: traffic policies, affinity, external addresses,
// node ports, hints, node addresses and the nodeport-addresses filter.
func decodeExtras(r *fuzzReader, in *model.Input) {
	for _, s := range in.Services {
		if s == nil {
			continue
		}
		s.Spec.InternalTrafficPolicy = pick(r, fzITPs)
		s.Spec.ExternalTrafficPolicy = pick(r, fzETPs)
		if s.Spec.SessionAffinity = pick(r, fzAffinities); s.Spec.SessionAffinity != "" {
			if t := pick(r, fzTimeouts); t != nil {
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: t}}
			}
		}
		s.Spec.TrafficDistribution = pick(r, fzDists)
		for range r.intn(3) {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, r.str(fzFrontendIPs))
		}
		for range r.intn(3) {
			ip := r.str(fzFrontendIPs)
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress,
				corev1.LoadBalancerIngress{IP: ip, IPMode: pick(r, fzIPModes)})
		}
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = pick(r, fzNodePorts)
		}
	}
	for _, sl := range in.Slices {
		if sl == nil {
			continue
		}
		for i := range sl.Endpoints {
			e := &sl.Endpoints[i]
			hints := r.intn(4) // 0 none, bit 0 zones, bit 1 nodes
			if hints == 0 {
				continue
			}
			e.Hints = &discoveryv1.EndpointHints{}
			if hints&1 != 0 {
				for range 1 + r.intn(2) {
					e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: pick(r, fzZones)})
				}
			}
			if hints&2 != 0 {
				for range 1 + r.intn(2) {
					e.Hints.ForNodes = append(e.Hints.ForNodes, discoveryv1.ForNode{Name: pick(r, fzNodes)})
				}
			}
		}
	}
	for range r.intn(5) {
		in.LocalAddresses = append(in.LocalAddresses, pick(r, fzLocal))
	}
	for range r.intn(3) {
		in.NodePortAddresses = append(in.NodePortAddresses, pick(r, fzPrefixes))
	}
	for _, n := range in.Nodes {
		if z := r.intn(len(fzZones) + 1); z > 0 {
			n.Labels[corev1.LabelTopologyZone] = fzZones[z-1]
		}
		for range r.intn(3) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{
				Type: pick(r, fzNodeAddrTypes), Address: r.str(fzNodeAddrs)})
		}
	}
	// Decoded last, with 0 meaning "absent", so older seeds decode as
	// they did: --nodeport-addresses primary, and healthCheckNodePorts.
	in.NodePortPrimary = r.intn(2) == 1
	for _, s := range in.Services {
		if s != nil {
			s.Spec.HealthCheckNodePort = pick(r, fzHealthCheckNodePorts)
		}
	}
	// Decoded after those, for the same reason: loadBalancerSourceRanges
	// and the cluster's other Nodes.
	for _, s := range in.Services {
		if s == nil {
			continue
		}
		for range r.intn(3) {
			s.Spec.LoadBalancerSourceRanges = append(s.Spec.LoadBalancerSourceRanges, r.str(fzSourceRanges))
		}
	}
	for range r.intn(3) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pick(r, fzOtherNodes)}}
		for range r.intn(3) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{
				Type: pick(r, fzNodeAddrTypes), Address: r.str(fzNodeAddrs)})
		}
		// A source holds one Node per name, as an informer does.
		if !slices.ContainsFunc(in.Nodes, func(o *corev1.Node) bool { return o.Name == n.Name }) {
			in.Nodes = append(in.Nodes, n)
		}
	}
}

func decodeService(r *fuzzReader) *corev1.Service {
	if r.intn(16) == 0 {
		return nil
	}
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: pick(r, fzNamespaces),
		Name:      pick(r, fzNames),
		Labels:    r.labels(),
	}}
	s.Spec.Type = pick(r, fzTypes)
	s.Spec.ClusterIP = r.str(fzClusterIPs)
	for range r.intn(3) {
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, r.str(fzClusterIPs))
	}
	for range r.intn(4) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{
			Name:     pick(r, fzPortNames),
			Protocol: pick(r, fzProtocols),
			Port:     r.port(),
		})
	}
	return s
}

func decodeSlice(r *fuzzReader) *discoveryv1.EndpointSlice {
	if r.intn(16) == 0 {
		return nil
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Namespace: pick(r, fzNamespaces),
		Name:      pick(r, fzSliceNames),
		Labels:    r.labels(),
	}}
	if svc := pick(r, fzNames); svc != "" || r.intn(2) == 0 {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[discoveryv1.LabelServiceName] = svc
	}
	s.AddressType = pick(r, fzAddrTypes)
	for range r.intn(4) {
		var p discoveryv1.EndpointPort
		if r.intn(4) != 0 {
			p.Name = ptr(pick(r, fzPortNames))
		}
		if r.intn(4) != 0 {
			p.Protocol = ptr(pick(r, fzProtocols))
		}
		if r.intn(4) != 0 {
			p.Port = ptr(r.port())
		}
		s.Ports = append(s.Ports, p)
	}
	for range r.intn(5) {
		var e discoveryv1.Endpoint
		for range r.intn(3) {
			e.Addresses = append(e.Addresses, r.str(fzAddrs))
		}
		e.Conditions = discoveryv1.EndpointConditions{Ready: r.optBool(), Serving: r.optBool(), Terminating: r.optBool()}
		if n := pick(r, fzNodes); n != "" {
			e.NodeName = ptr(n)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func deepCopyInput(in model.Input) model.Input {
	out := model.Input{
		NodeName:          in.NodeName,
		LocalAddresses:    slices.Clone(in.LocalAddresses),
		NodePortAddresses: slices.Clone(in.NodePortAddresses),
		ExternalIPCIDRs:   slices.Clone(in.ExternalIPCIDRs),
		NodePortPrimary:   in.NodePortPrimary,
		PeerAddresses:     model.NewAddrSet(slices.Clone(in.PeerAddresses.Addrs())),
	}
	for _, s := range in.Services {
		out.Services = append(out.Services, s.DeepCopy())
	}
	for _, s := range in.Slices {
		out.Slices = append(out.Slices, s.DeepCopy())
	}
	for _, n := range in.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	return out
}
