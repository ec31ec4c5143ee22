package main

// The API objects every dataplane is fed with: N Services, each a
// ClusterIP with an EndpointSlice of 10 endpoints, written straight to the
// API server (selector-less Services, as the EndpointSlice controller would
// write them: writing 100 000 Pods instead would only measure the API
// server). Two of them are real: "target" (its one endpoint is the lab's
// target pod, TCP 80 -> 8080 and UDP 53 -> 5353) and "probe" (one endpoint
// that flips between pods pa and pb: the programming-latency probe).

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/socklb/socklb/internal/testkit"
)

const (
	// serviceCIDR holds 1 048 574 ClusterIPs (the API server's /12 limit
	// for IPv4): the default /16 runs out before 100 000 Services.
	serviceCIDR = "10.96.0.0/12"
	benchNS     = "bench"
	nodeName    = "node-a"
	managedBy   = "socklb-bench"
	// Lab pods, the same addresses in every dataplane's lab.
	targetIP = "10.244.1.10"
	podAIP   = "10.244.1.11"
	podBIP   = "10.244.1.12"
	tcpPort  = 8080
	udpPort  = 5353
	// Endpoints per filler Service: the same for every dataplane, so a
	// cost per Service compares, and enough that a Service is more than
	// one rule or map entry.
	endpointsPerService = 10
)

type objects struct {
	c         kubernetes.Interface
	targetVIP string
	probeVIP  string
	probe     *discoveryv1.EndpointSlice // last written
	probeOn   string                     // "a" or "b"
	fillers   int
	others    int    // Services besides the fillers: target, probe (and the external scenario's)
	etcd      string // etcd's client URL: fillers are written there (etcdfill.go); "": through the API server
	churned   int    // endpoint changes made by churnOne so far
	shape     shape  // how the fillers look
	// writeRates are the API writes per second of each grow, kept in the
	// run's machine facts: at 100 000 Services the 200 000 writes take
	// minutes, and a slow API server shows there first.
	writeRates []string
}

// shape is how the fillers look: one TCP port and no NodePort in the
// sizes' runs, more in the capacity case (capacity.go).
type shape struct {
	ports         int // TCP ports 80, 81, ... to 8080, 8081, ... (0 is 1)
	nodePortEvery int // filler i is a NodePort when i % nodePortEvery == 0; 0: none
}

// fillerNodePortBase is the first filler NodePort: above the API server's
// default range (30000-32767, the target's), below the SNAT ports (61000):
// the fillers go to etcd past the allocator.
const fillerNodePortBase = 33000

func (sh shape) portCount() int { return max(sh.ports, 1) }

func (sh shape) nodePort(i int) bool { return sh.nodePortEvery > 0 && i%sh.nodePortEvery == 0 }

// servicePorts are filler i's ports: unnamed when it has one, as before.
func (sh shape) servicePorts(i int) []corev1.ServicePort {
	n := sh.portCount()
	out := make([]corev1.ServicePort, n)
	for j := range out {
		out[j] = corev1.ServicePort{Port: int32(80 + j), TargetPort: intstr.FromInt32(int32(tcpPort + j)), Protocol: corev1.ProtocolTCP}
		if n > 1 {
			out[j].Name = fmt.Sprintf("p%d", j)
		}
		if sh.nodePort(i) {
			out[j].NodePort = int32(fillerNodePortBase + (i/sh.nodePortEvery)*n + j)
		}
	}
	return out
}

func (sh shape) endpointPorts() []discoveryv1.EndpointPort {
	n := sh.portCount()
	if n == 1 {
		return []discoveryv1.EndpointPort{tcpEP("")}
	}
	out := make([]discoveryv1.EndpointPort, n)
	for j := range out {
		out[j] = testkit.EndpointPort(fmt.Sprintf("p%d", j), corev1.ProtocolTCP, int32(tcpPort+j))
	}
	return out
}

func slice(name, svc string, ports []discoveryv1.EndpointPort, ips ...string) *discoveryv1.EndpointSlice {
	s := testkit.EndpointSlice(benchNS+"/"+name, svc, discoveryv1.AddressTypeIPv4, ports)
	s.Labels[discoveryv1.LabelManagedBy] = managedBy
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, testkit.OnNode(nodeName, testkit.ReadyEndpoint(ip)))
	}
	return s
}

func tcpEP(name string) discoveryv1.EndpointPort {
	return testkit.EndpointPort(name, corev1.ProtocolTCP, tcpPort)
}

func service(name string, ports ...corev1.ServicePort) *corev1.Service {
	return testkit.Service(benchNS+"/"+name, "", ports...)
}

// setupObjects creates the Node, the namespace, and the two real Services.
func setupObjects(ctx context.Context, c kubernetes.Interface) (*objects, error) {
	node, err := c.CoreV1().Nodes().Create(ctx, testkit.Node(nodeName, ""), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.244.0.1"}, {Type: corev1.NodeHostName, Address: nodeName}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	o := &objects{c: c, others: 2}
	tgt, err := c.CoreV1().Services(benchNS).Create(ctx, service("target",
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(tcpPort), Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(udpPort), Protocol: corev1.ProtocolUDP},
	), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	o.targetVIP = tgt.Spec.ClusterIP
	if _, err := c.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, slice("target", "target", []discoveryv1.EndpointPort{
		tcpEP("http"),
		testkit.EndpointPort("dns", corev1.ProtocolUDP, udpPort),
	}, targetIP), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	prb, err := c.CoreV1().Services(benchNS).Create(ctx, service("probe",
		corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(tcpPort), Protocol: corev1.ProtocolTCP},
	), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	o.probeVIP = prb.Spec.ClusterIP
	if o.probe, err = c.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, slice("probe", "probe", []discoveryv1.EndpointPort{tcpEP("http")}, podAIP), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	o.probeOn = "a"
	return o, nil
}

// fillerIP is endpoint j of filler i: 10.128.0.0/9, never a lab address.
func fillerIP(i, j int) string {
	n := uint32(10)<<24 | uint32(128)<<16 | uint32(i*16+j)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// grow creates filler Services (and their slices) until there are total
// Services in the namespace, counting the others (target, probe, and the
// external scenario's NodePort Services).
func (o *objects) grow(ctx context.Context, total int) error {
	want := total - o.others
	if want <= o.fillers {
		return nil
	}
	start, from := time.Now(), o.fillers
	if o.etcd != "" {
		if err := o.growEtcd(ctx, from, want); err != nil {
			return err
		}
		o.fillers = want
		el := time.Since(start)
		o.writeRates = append(o.writeRates, fmt.Sprintf("N=%d: %.0f/s into etcd", total, float64(3*(want-from))/el.Seconds()))
		logf("API objects: %d Services with %d endpoints each (+ %d others: target, probe ...), %d written into etcd and listed by the API server in %s",
			want, endpointsPerService, o.others, want-from, el.Round(time.Millisecond))
		return nil
	}
	err := inParallel(ctx, 16, from, want, 1, func(i, _ int) error {
		name := fmt.Sprintf("fill-%d", i)
		err := retry(ctx, func() error {
			_, err := o.c.CoreV1().Services(benchNS).Create(ctx, service(name,
				corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(tcpPort), Protocol: corev1.ProtocolTCP}), metav1.CreateOptions{})
			return ignoreExists(err)
		})
		if err == nil {
			ips := make([]string, endpointsPerService)
			for j := range ips {
				ips[j] = fillerIP(i, j)
			}
			err = retry(ctx, func() error {
				_, err := o.c.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, slice(name, name, []discoveryv1.EndpointPort{
					tcpEP(""),
				}, ips...), metav1.CreateOptions{})
				return ignoreExists(err)
			})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	o.fillers = want
	// The rate says whether the 200 000 objects of N=100 000 fit a run:
	// each filler is a Service and its EndpointSlice, two writes.
	el := time.Since(start)
	o.writeRates = append(o.writeRates, fmt.Sprintf("N=%d: %.0f/s", total, float64(2*(want-from))/el.Seconds()))
	logf("API objects: %d Services with %d endpoints each (+ %d others: target, probe ...), %d written in %s (%.0f objects/s)",
		want, endpointsPerService, o.others, want-from, el.Round(time.Millisecond), float64(2*(want-from))/el.Seconds())
	return nil
}

// flip points the probe Service at the other pod, and returns that pod's
// reply byte and the time of the write.
func (o *objects) flip(ctx context.Context) (want string, at time.Time, err error) {
	ip, want := podBIP, "b"
	if o.probeOn == "b" {
		ip, want = podAIP, "a"
	}
	s := o.probe.DeepCopy()
	s.Endpoints[0].Addresses = []string{ip}
	at = time.Now()
	s, err = o.c.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return "", at, err
	}
	o.probe, o.probeOn = s, want
	return want, at, nil
}

func retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// churnOne changes one endpoint of one filler Service: the k-th change
// moves filler k mod fillers' first endpoint between its address and a
// spare one of its own block (fillerIP(i, 10)), so that successive changes
// touch different Services, as a cluster's churn would.
func (o *objects) churnOne(ctx context.Context, k int) error {
	if o.fillers == 0 {
		return fmt.Errorf("no filler Services to churn")
	}
	i := k % o.fillers
	name := fmt.Sprintf("fill-%d", i)
	s, err := o.c.DiscoveryV1().EndpointSlices(benchNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(s.Endpoints) == 0 || len(s.Endpoints[0].Addresses) == 0 {
		return fmt.Errorf("%s: no endpoint to change", name)
	}
	ip := fillerIP(i, 0)
	if s.Endpoints[0].Addresses[0] == ip {
		ip = fillerIP(i, endpointsPerService)
	}
	s.Endpoints[0].Addresses = []string{ip}
	_, err = o.c.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, s, metav1.UpdateOptions{})
	return err
}
