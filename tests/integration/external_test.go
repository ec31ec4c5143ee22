package integration

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

// The per-packet path end to end: an outside machine reaches Services
// through node 1, whose agent serves its eth0 (xenv_test.go).

// TestExternalNodePortClusterPolicy: an outside client reaches a NodePort
// on node 1 over TCP and UDP, IPv4 and IPv6, and is spread over a pod of
// node 1 and a pod of node 2 (externalTrafficPolicy Cluster). The pod
// behind node 2 sees node 1's address (SNAT, so its reply comes back
// through node 1), the pod on node 1 sees the client's own. A UDP client's
// unconnected socket is one flow, kept on one pod, and its replies come
// from the address and port it asked.
func TestExternalNodePortClusterPolicy(t *testing.T) {
	eps := []ep{readyEP("10.244.1.11", "n1"), readyEP("10.244.2.11", "n2"), readyEP("fd00:244:1::11", "n1"), readyEP("fd00:244:2::11", "n2")}
	e := newXEnv(t, map[string]string{
		"web.yaml": svcSpec{name: "web", typ: "NodePort", clusterIPs: []string{"10.96.0.10", "fd00:96::10"}, nodePort: 30080, udpNodePort: 30053}.yaml(eps...),
	})
	e.waitInspect(n1IP+":30080/TCP", "["+n1IP6+"]:30053/UDP", "10.244.2.11:8080")
	for _, node := range []string{n1IP, "[" + n1IP6 + "]"} {
		res := e.outside("tcp", node+":30080", 60)
		if res.OK != 60 || res.Replies["n1-p1"] == 0 || res.Replies["n2-p1"] == 0 {
			t.Errorf("TCP to %s:30080: %d of 60 answered, by %v (errors %v); want all, by n1-p1 and n2-p1", node, res.OK, res.Replies, res.Errors)
		}
		udp := e.outside("udp", node+":30053", 60)
		if udp.OK != 60 || len(udp.Replies) != 1 {
			t.Errorf("UDP to %s:30053 from one socket: %d of 60 answered, by %v (errors %v); want all, by one pod", node, udp.OK, udp.Replies, udp.Errors)
		}
		if want := []string{node + ":30053"}; !slices.Equal(udp.Sources, want) {
			t.Errorf("UDP replies came from %v, want %v", udp.Sources, want)
		}
	}
	// Many UDP clients (a socket each: --reconnect) spread over both pods.
	udp := e.outside("udp-connected", n1IP+":30053", 40, "--reconnect")
	if udp.OK != 40 || udp.Replies["n1-p1"] == 0 || udp.Replies["n2-p1"] == 0 {
		t.Errorf("UDP to %s:30053 from 40 sockets: %d answered, by %v (errors %v); want all, by both pods", n1IP, udp.OK, udp.Replies, udp.Errors)
	}
	client := []netip.Addr{netip.MustParseAddr(outsideIP), netip.MustParseAddr("fd00:250::100")}
	node1 := []netip.Addr{netip.MustParseAddr(n1IP), netip.MustParseAddr(n1IP6)}
	for pod, want := range map[string][]netip.Addr{"n1-p1": client, "n2-p1": node1} {
		got := e.peers(pod, "tcp")
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, want) {
			t.Errorf("%s saw TCP connections from %v, want %v", pod, got, want)
		}
	}
}

// TestExternalLoadBalancerAndExternalIP: the outside reaches a
// LoadBalancer ingress IP and an externalIP it routes to node 1, TCP and
// UDP, and UDP replies come from those addresses.
func TestExternalLoadBalancerAndExternalIP(t *testing.T) {
	eps := []ep{readyEP("10.244.2.11", "n2"), readyEP("10.244.2.12", "n2")}
	e := newXEnv(t, map[string]string{
		"lb.yaml":  svcSpec{name: "lb", typ: "LoadBalancer", clusterIPs: []string{"10.96.0.20"}, nodePort: 30081, udpNodePort: 30054, lbIngress: []string{"203.0.113.10"}}.yaml(eps...),
		"ext.yaml": svcSpec{name: "ext", clusterIPs: []string{"10.96.0.21"}, externalIPs: []string{"198.51.100.10"}}.yaml(eps...),
	}, "--external-ip-cidrs", "198.51.100.0/24")
	for _, p := range []string{"203.0.113.10/32", "198.51.100.10/32"} {
		if err := e.m.RouteVia(netip.MustParsePrefix(p), 1); err != nil {
			t.Fatal(err)
		}
	}
	e.waitInspect("203.0.113.10:80/TCP", "198.51.100.10:53/UDP")
	for _, addr := range []string{"203.0.113.10", "198.51.100.10"} {
		if res := e.outside("tcp", addr+":80", 20); res.OK != 20 {
			t.Errorf("TCP to %s:80: %d of 20 answered (%v, errors %v)", addr, res.OK, res.Replies, res.Errors)
		}
		udp := e.outside("udp", addr+":53", 20)
		if udp.OK != 20 || !slices.Equal(udp.Sources, []string{addr + ":53"}) {
			t.Errorf("UDP to %s:53: %d of 20 answered, from %v (errors %v); want all, from %s:53", addr, udp.OK, udp.Sources, udp.Errors, addr)
		}
	}
}

// TestExternalNoEndpointsRefused: a Service without endpoints refuses an
// outside client at once (ICMP port unreachable, as iptables' REJECT), not
// after a timeout.
func TestExternalNoEndpointsRefused(t *testing.T) {
	e := newXEnv(t, map[string]string{
		"empty.yaml": svcSpec{name: "empty", typ: "NodePort", clusterIPs: []string{"10.96.0.30"}, nodePort: 30090}.yaml(),
	})
	e.waitInspect(n1IP + ":30090/TCP")
	res := e.outside("tcp", n1IP+":30090", 5)
	if res.Errors["ECONNREFUSED"] != 5 {
		t.Errorf("TCP to a Service without endpoints: %v, errors %v; want 5 ECONNREFUSED", res.Replies, res.Errors)
	}
}

// TestExternalAffinityByClientAddress: with sessionAffinity ClientIP the
// outside client, known by its address, keeps one pod over 30 connections,
// whichever node that pod is on.
func TestExternalAffinityByClientAddress(t *testing.T) {
	eps := []ep{readyEP("10.244.1.11", "n1"), readyEP("10.244.1.12", "n1"), readyEP("10.244.2.11", "n2"), readyEP("10.244.2.12", "n2")}
	e := newXEnv(t, map[string]string{
		"sticky.yaml": svcSpec{name: "sticky", typ: "NodePort", clusterIPs: []string{"10.96.0.40"}, nodePort: 30100, affinity: true}.yaml(eps...),
	})
	e.waitInspect(n1IP+":30100/TCP", "affinity=ClientIP")
	res := e.outside("tcp", n1IP+":30100", 30)
	if res.OK != 30 || len(res.Replies) != 1 {
		t.Errorf("30 connects with sessionAffinity ClientIP were answered by %v (errors %v); want one pod for all", res.Replies, res.Errors)
	}
}

// TestRemoteNodePortFromPod: a pod on node 1 dials node 2's address at a
// NodePort. Node 2 runs no agent, so only a translation at connect() on
// node 1 can answer; getpeername still shows node 2's address. Under
// externalTrafficPolicy Local the choice is node 2's (kube-proxy leaves
// the packet to that node, which serves it from its own endpoints only),
// so node 1 does not translate it and node 2 answers as it is.
func TestRemoteNodePortFromPod(t *testing.T) {
	eps := []ep{readyEP("10.244.1.12", "n1"), readyEP("10.244.2.12", "n2"), readyEP("fd00:244:2::12", "n2")}
	e := newXEnv(t, map[string]string{
		"web.yaml":   svcSpec{name: "web", typ: "NodePort", clusterIPs: []string{"10.96.0.50", "fd00:96::50"}, nodePort: 30110}.yaml(eps...),
		"local.yaml": svcSpec{name: "local", typ: "NodePort", etp: "Local", clusterIPs: []string{"10.96.0.51"}, nodePort: 30112}.yaml(readyEP("10.244.1.12", "n1")),
	})
	e.waitInspect(n1IP+":30110/TCP", n1IP+":30112/TCP")
	pod := e.m.Pod("n1-p1").Client()
	for _, addr := range []string{n2IP + ":30110", "[" + n2IP6 + "]:30110"} {
		res, err := pod.TCP(e.ctx(), e.cg, addr, 20)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK != 20 || res.Peer != addr {
			t.Errorf("pod n1-p1 -> %s: %d of 20 answered by %v (errors %v), peer %q; want all, peer %s", addr, res.OK, res.Replies, res.Errors, res.Peer, addr)
		}
	}
	// A port that is no NodePort crosses to node 2 as it is (and is
	// refused there, where nothing listens).
	res, err := pod.TCP(e.ctx(), e.cg, n2IP+":30111", 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 0 || !strings.Contains(strings.Join(keys(res.Errors), ","), "ECONNREFUSED") {
		t.Errorf("pod n1-p1 -> %s:30111 (no NodePort): %v errors %v; want refused by node 2", n2IP, res.Replies, res.Errors)
	}
	res, err = pod.TCP(e.ctx(), e.cg, n2IP+":30112", 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 0 || !strings.Contains(strings.Join(keys(res.Errors), ","), "ECONNREFUSED") {
		t.Errorf("pod n1-p1 -> %s:30112 (externalTrafficPolicy Local, its endpoint on node 1): %v errors %v; want it left to node 2 (refused there: no agent)", n2IP, res.Replies, res.Errors)
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestAgentKilledUnderExternalLoad: the agent is killed (-9) and started
// again while an outside client connects to a NodePort in a loop, half its
// flows SNATed to node 2: the pinned device links and flows keep serving
// while no agent runs, and the new agent adopts them. No connect fails.
// The loop runs until the new agent has taken the devices over and served
// it a window; the window with no agent and that one each serve at least
// minShare of the connects of the window before the kill.
func TestAgentKilledUnderExternalLoad(t *testing.T) {
	eps := []ep{readyEP("10.244.1.11", "n1"), readyEP("10.244.2.11", "n2")}
	e := newXEnv(t, map[string]string{
		"web.yaml": svcSpec{name: "web", typ: "NodePort", clusterIPs: []string{"10.96.0.60"}, nodePort: 30120}.yaml(eps...),
	})
	e.waitInspect(n1IP + ":30120/TCP")
	served := func() int64 { return sum(e.m.Counts("tcp")) }
	bg := startLoop(t, e.ctx(), e.m.Outside, nil, n1IP+":30120", served)
	baseline := servedIn(served, window)
	e.stop(syscall.SIGKILL)
	checkShare(t, "no agent running", servedIn(served, window), baseline)
	e.start()
	// The log is the new agent's alone (start truncates it).
	deadline := time.Now().Add(liveness)
	for !strings.Contains(e.log(), "serving traffic from other machines") {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted agent did not take the devices over:\n%s", e.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkShare(t, "after the restart", servedIn(served, window), baseline)
	res := stopLoop(t, bg, "the restart")
	t.Logf("%d connects across kill -9 and restart, by %v, longest gap %s", res.OK, res.Replies, res.LongestGap)
	if res.TotalErrors() != 0 || res.Replies["n1-p1"] == 0 || res.Replies["n2-p1"] == 0 {
		t.Errorf("connect loop across kill -9 and restart: %d answered by %v, errors %v (first: %s); want both pods, none failed",
			res.OK, res.Replies, res.Errors, res.FirstError)
	}
}

// TestExternalTrafficPolicyLocal: externalTrafficPolicy Local through node
// 1 reaches only node 1's pod, which sees the outside client's own
// address; a Service whose endpoints are all on node 2 is not served
// through node 1 (kube-proxy drops: the client times out), while a pod on
// node 1 still reaches it through the NodePort (kube-proxy's short-circuit
// for traffic that starts on the node).
func TestExternalTrafficPolicyLocal(t *testing.T) {
	e := newXEnv(t, map[string]string{
		"local.yaml": svcSpec{name: "local", typ: "NodePort", etp: "Local", clusterIPs: []string{"10.96.0.70"}, nodePort: 30130, udpNodePort: 30131, hcNodePort: 30132}.yaml(
			readyEP("10.244.1.11", "n1"), readyEP("10.244.2.11", "n2")),
		"remote.yaml": svcSpec{name: "remote", typ: "NodePort", etp: "Local", clusterIPs: []string{"10.96.0.71"}, nodePort: 30140, hcNodePort: 30142}.yaml(
			readyEP("10.244.2.12", "n2")),
	})
	e.waitInspect(n1IP+":30130/TCP", n1IP+":30140/TCP")
	res := e.outside("tcp", n1IP+":30130", 30)
	if res.OK != 30 || res.Replies["n1-p1"] != 30 {
		t.Errorf("eTP Local via node 1: %d of 30 answered by %v (errors %v); want all by n1-p1", res.OK, res.Replies, res.Errors)
	}
	udp := e.outside("udp-connected", n1IP+":30131", 20, "--reconnect")
	if udp.OK != 20 || udp.Replies["n1-p1"] != 20 {
		t.Errorf("eTP Local via node 1, UDP: %d of 20 answered by %v (errors %v); want all by n1-p1", udp.OK, udp.Replies, udp.Errors)
	}
	if got := e.peers("n1-p1", "tcp"); !slices.Equal(got, []netip.Addr{netip.MustParseAddr(outsideIP)}) {
		t.Errorf("n1-p1 saw connections from %v, want the client's own %s", got, outsideIP)
	}
	res = e.outside("tcp", n1IP+":30140", 2, "--timeout", "500ms")
	if res.OK != 0 || res.Errors["timeout"] != 2 {
		t.Errorf("eTP Local with no endpoint on node 1: %v, errors %v; want 2 timeouts (dropped)", res.Replies, res.Errors)
	}
	pod, err := e.m.Pod("n1-p2").Client().TCP(e.ctx(), e.cg, n1IP+":30140", 5)
	if err != nil {
		t.Fatal(err)
	}
	if pod.OK != 5 || pod.Replies["n2-p2"] != 5 {
		t.Errorf("a pod on node 1 -> NodePort of an eTP Local Service with endpoints elsewhere: %v, errors %v; want 5 by n2-p2", pod.Replies, pod.Errors)
	}
}

// TestLoadBalancerSourceRangesFromOutside: a LoadBalancer IP with
// loadBalancerSourceRanges answers the outside client while its address is
// in a range, and drops it once the ranges leave it out.
func TestLoadBalancerSourceRangesFromOutside(t *testing.T) {
	lb := svcSpec{name: "fw", typ: "LoadBalancer", clusterIPs: []string{"10.96.0.80"}, nodePort: 30150, lbIngress: []string{"203.0.113.20"}, srcRanges: []string{outsideIP + "/32"}}
	eps := []ep{readyEP("10.244.2.11", "n2")}
	e := newXEnv(t, map[string]string{"fw.yaml": lb.yaml(eps...)})
	if err := e.m.RouteVia(netip.MustParsePrefix("203.0.113.20/32"), 1); err != nil {
		t.Fatal(err)
	}
	e.waitInspect("203.0.113.20:80/TCP")
	if res := e.outside("tcp", "203.0.113.20:80", 10); res.OK != 10 {
		t.Errorf("a source inside loadBalancerSourceRanges: %d of 10 answered (errors %v)", res.OK, res.Errors)
	}
	lb.srcRanges = []string{"192.0.2.0/24"}
	e.write("fw.yaml", lb.yaml(eps...))
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := e.outside("tcp", "203.0.113.20:80", 2, "--timeout", "500ms")
		if res.OK == 0 && res.Errors["timeout"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a source outside loadBalancerSourceRanges still answered 10 s after the change: %v, errors %v", res.Replies, res.Errors)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The NodePort of the same Service is not behind the ranges.
	if res := e.outside("tcp", n1IP+":30150", 5); res.OK != 5 {
		t.Errorf("the NodePort of a Service with source ranges: %d of 5 answered (errors %v); kube-proxy checks only the LB IP", res.OK, res.Errors)
	}
}

// TestDeviceLinksStayThenGo: the device programs stay attached when the
// agent stops (SIGTERM: the datapath keeps serving) and `socklb cleanup`
// detaches them, as it does the cgroup hooks.
func TestDeviceLinksStayThenGo(t *testing.T) {
	e := newXEnv(t, map[string]string{
		"web.yaml": svcSpec{name: "web", typ: "NodePort", clusterIPs: []string{"10.96.0.95"}, nodePort: 30160}.yaml(readyEP("10.244.1.11", "n1")),
	})
	e.waitInspect(n1IP + ":30160/TCP")
	tcx := func() string {
		progs, err := e.deviceProgs(1)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(progs, " ")
	}
	e.stop(syscall.SIGTERM)
	for _, prog := range []string{"socklb_from_netdev", "socklb_to_netdev"} {
		if out := tcx(); !strings.Contains(out, prog) {
			t.Errorf("after SIGTERM %s should stay on eth0; it has: %s", prog, out)
		}
	}
	if res := e.outside("tcp", n1IP+":30160", 5); res.OK != 5 {
		t.Errorf("with no agent running, the NodePort from outside: %d of 5 answered (errors %v)", res.OK, res.Errors)
	}
	if out, err := exec.Command(socklbBin, "cleanup", "--bpffs-path", e.fs.Path()).CombinedOutput(); err != nil {
		t.Fatalf("socklb cleanup: %v %s", err, out)
	}
	// Unpinning drops the link's last reference from a kernel workqueue
	// (bpf_link_put defers the free), so the detach lands a moment after
	// cleanup returns.
	if !eventually(5*time.Second, func() bool { return !strings.Contains(tcx(), "socklb_") }) {
		t.Errorf("5 s after socklb cleanup a socklb program is still on eth0: %s", tcx())
	}
}

// TestOwnNodePortTerminatingLocalEndpoint: upstream's "fallback to local
// terminating endpoints ... externalTrafficPolicy=Local": the Service's one
// endpoint, on node 1, is terminating but still serving; a pod on node 1
// reaches it through node 1's NodePort, and so does the outside client
// through node 1 (the Local fallback to serving-terminating endpoints).
func TestOwnNodePortTerminatingLocalEndpoint(t *testing.T) {
	svc := svcSpec{name: "web", typ: "NodePort", etp: "Local", clusterIPs: []string{"10.96.0.97"}, nodePort: 30170}
	e := newXEnv(t, map[string]string{"web.yaml": svc.yaml(readyEP("10.244.1.11", "n1"))})
	e.waitInspect(n1IP + ":30170/TCP")
	if res := e.outside("tcp", n1IP+":30170", 3); res.OK != 3 {
		t.Fatalf("the outside -> node 1's NodePort, the endpoint ready: %v, errors %v", res.Replies, res.Errors)
	}
	// The pod is deleted: its endpoint is terminating, still serving.
	e.write("web.yaml", svc.yaml(ep{ip: "10.244.1.11", node: "n1", serving: true, terminating: true}))
	out := e.waitInspect("10.96.0.97:80/TCP")
	time.Sleep(time.Second)
	pod, err := e.m.Pod("n1-p2").Client().TCP(e.ctx(), e.cg, n1IP+":30170", 5)
	if err != nil {
		t.Fatal(err)
	}
	if pod.OK != 5 || pod.Replies["n1-p1"] != 5 {
		t.Errorf("a pod on node 1 -> node 1's NodePort, the one endpoint local and terminating: %v, errors %v; want 5 by n1-p1\n%s", pod.Replies, pod.Errors, out)
	}
	if res := e.outside("tcp", n1IP+":30170", 5); res.OK != 5 || res.Replies["n1-p1"] != 5 {
		t.Errorf("the outside -> node 1's NodePort: %v, errors %v; want 5 by n1-p1", res.Replies, res.Errors)
	}
}

// TestClusterIPFromOutsideNotServed: a deliberate difference. A router
// that sends the Service CIDR to a node gets its packets DNATed by
// kube-proxy; socklb's per-packet path leaves a ClusterIP alone, as
// Cilium does by default (bpf-lb-external-clusterip off), so the outside
// client gets no answer while the same Service's NodePort answers it.
func TestClusterIPFromOutsideNotServed(t *testing.T) {
	e := newXEnv(t, map[string]string{
		"web.yaml": svcSpec{name: "web", typ: "NodePort", clusterIPs: []string{"10.96.0.90"}, nodePort: 30160}.yaml(readyEP("10.244.1.11", "n1")),
	})
	if err := e.m.RouteVia(netip.MustParsePrefix("10.96.0.90/32"), 1); err != nil {
		t.Fatal(err)
	}
	e.waitInspect(n1IP+":30160/TCP", "10.96.0.90:80/TCP")
	if res := e.outside("tcp", n1IP+":30160", 5); res.OK != 5 {
		t.Fatalf("the NodePort from outside: %d of 5 answered (errors %v); the lab does not serve it", res.OK, res.Errors)
	}
	if res := e.outside("tcp", "10.96.0.90:80", 3, "--timeout", "500ms"); res.OK != 0 {
		t.Errorf("the ClusterIP from outside: %d of 3 answered by %v; want none (not served from outside)", res.OK, res.Replies)
	}
}

// TestSourceRangesCheckedForSockets: a socket on the node (here a pod of
// node 1) meets loadBalancerSourceRanges as its packets would under
// kube-proxy, whose KUBE-PROXY-FIREWALL drops a source outside every
// range: over TCP and UDP (connected and not) the pod, not in the ranges,
// gets no answer from the LB IP, while the Service's ClusterIP (not behind
// the ranges) still answers it; once a range holds the pod, the LB IP
// answers it too, and the outside client stays dropped.
func TestSourceRangesCheckedForSockets(t *testing.T) {
	lb := svcSpec{name: "fw", typ: "LoadBalancer", clusterIPs: []string{"10.96.0.81"}, nodePort: 30151, lbIngress: []string{"203.0.113.21"}, srcRanges: []string{"192.0.2.0/24"}, udpNodePort: 30152}
	eps := []ep{readyEP("10.244.2.11", "n2")}
	e := newXEnv(t, map[string]string{"fw.yaml": lb.yaml(eps...)})
	if err := e.m.RouteVia(netip.MustParsePrefix("203.0.113.21/32"), 1); err != nil {
		t.Fatal(err)
	}
	e.waitInspect("203.0.113.21:80/TCP", "203.0.113.21:53/UDP")
	pod := e.m.Pod("n1-p1").Client()
	run := func(args ...string) *lab.Result {
		t.Helper()
		res, err := pod.RunResult(e.ctx(), e.cg, args...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	port := map[string]string{"tcp": "80", "udp": "53", "udp-connected": "53"}
	for _, mode := range []string{"tcp", "udp", "udp-connected"} {
		if res := run(mode, "--addr", "203.0.113.21:"+port[mode], "--count", "3", "--timeout", "500ms"); res.OK != 0 {
			t.Errorf("%s: pod n1-p1 (10.244.1.11, not in 192.0.2.0/24) -> the LB IP: %d of 3 answered by %v; kube-proxy drops it", mode, res.OK, res.Replies)
		}
		if res := run(mode, "--addr", "10.96.0.81:"+port[mode], "--count", "3"); res.OK != 3 {
			t.Errorf("%s: pod n1-p1 -> the ClusterIP of the same Service: %d of 3 answered (errors %v); the ranges guard the LB IP only", mode, res.OK, res.Errors)
		}
	}
	if res := e.outside("tcp", "203.0.113.21:80", 2, "--timeout", "500ms"); res.OK != 0 {
		t.Fatalf("the outside client, not in the ranges: %d of 2 answered; want it dropped", res.OK)
	}
	lb.srcRanges = []string{"192.0.2.0/24", "10.244.1.0/24"}
	e.write("fw.yaml", lb.yaml(eps...))
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := run("tcp", "--addr", "203.0.113.21:80", "--count", "1", "--timeout", "500ms")
		if res.OK == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod n1-p1 -> the LB IP, 10 s after 10.244.1.0/24 joined the ranges: errors %v", res.Errors)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, mode := range []string{"tcp", "udp", "udp-connected"} {
		if res := run(mode, "--addr", "203.0.113.21:"+port[mode], "--count", "5", "--seq"); res.OK != 5 {
			t.Errorf("%s: pod n1-p1, now in the ranges -> the LB IP: %d of 5 answered (errors %v)", mode, res.OK, res.Errors)
		}
	}
	if res := e.outside("tcp", "203.0.113.21:80", 2, "--timeout", "500ms"); res.OK != 0 {
		t.Errorf("the outside client, still not in the ranges: %d of 2 answered; want it dropped", res.OK)
	}
}

// TestEgressHookFollowsSourceRanges: the egress hook that checks a
// socket's source against loadBalancerSourceRanges costs every packet of
// every socket in the cgroup, so it is attached only while a Service has
// ranges: a Service gaining ranges at run time drops the pod outside them
// from then on (the hook came in with the ranges), and losing them answers
// the pod again with the hook gone.
func TestEgressHookFollowsSourceRanges(t *testing.T) {
	lb := svcSpec{name: "fw", typ: "LoadBalancer", clusterIPs: []string{"10.96.0.82"}, nodePort: 30153, lbIngress: []string{"203.0.113.22"}, udpNodePort: 30154}
	eps := []ep{readyEP("10.244.2.11", "n2")}
	e := newXEnv(t, map[string]string{"fw.yaml": lb.yaml(eps...)})
	e.waitInspect("203.0.113.22:80/TCP", "203.0.113.22:53/UDP")
	pod := e.m.Pod("n1-p1").Client()
	answered := func(mode string) int {
		t.Helper()
		port := map[string]string{"tcp": "80", "udp": "53", "udp-connected": "53"}[mode]
		res, err := pod.RunResult(e.ctx(), e.cg, mode, "--addr", "203.0.113.22:"+port, "--count", "3", "--timeout", "500ms")
		if err != nil {
			t.Fatal(err)
		}
		return res.OK
	}
	egressAttached := func() bool {
		t.Helper()
		out, err := exec.Command("bpftool", "cgroup", "show", e.cg.Path()).CombinedOutput()
		if err != nil {
			t.Fatalf("bpftool cgroup show %s: %v %s", e.cg.Path(), err, out)
		}
		return strings.Contains(string(out), "egress")
	}
	// waitAnswered polls until the pod's TCP connects get want answers of 3.
	waitAnswered := func(when string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := answered("tcp"); got != want; got = answered("tcp") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: pod n1-p1 -> the LB IP: %d of 3 answered after 10 s, want %d", when, got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	if egressAttached() {
		t.Errorf("no Service has source ranges, yet the egress hook is attached")
	}
	waitAnswered("no ranges", 3)

	lb.srcRanges = []string{"192.0.2.0/24"}
	e.write("fw.yaml", lb.yaml(eps...))
	waitAnswered("ranges added, none holding the pod", 0)
	if !egressAttached() {
		t.Errorf("a Service has source ranges, and the egress hook is not attached")
	}
	for _, mode := range []string{"udp", "udp-connected"} {
		if got := answered(mode); got != 0 {
			t.Errorf("%s: pod n1-p1 (not in 192.0.2.0/24) -> the LB IP: %d of 3 answered; kube-proxy drops it", mode, got)
		}
	}

	lb.srcRanges = nil
	e.write("fw.yaml", lb.yaml(eps...))
	waitAnswered("ranges removed", 3)
	if got := answered("udp-connected"); got != 3 {
		t.Errorf("udp-connected: ranges removed, %d of 3 answered", got)
	}
	// Detached right after the Apply that wrote the Service without them.
	deadline := time.Now().Add(5 * time.Second)
	for egressAttached() {
		if time.Now().After(deadline) {
			t.Fatalf("the ranges are gone, and the egress hook is still attached 5 s later")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
