package main

// The external scenario (--scenario external): clients on another machine
// reach a NodePort of node 1, the traffic socklb serves per packet (tcx
// programs on the node's device, --packet-lb) and kube-proxy in PREROUTING.
//
// Each dataplane gets its own multi-node lab (internal/lab: two nodes on an
// underlay bridge with one pod each, and the outside machine), and runs on
// both nodes, inside each node's network namespace, fed by the same API
// server as the ClusterIP scenario (through a socat bridge in each node):
//
//   - direct: no proxy; the outside routes each pod CIDR via the pod's node
//     and connects to the pod itself: the baseline;
//   - socklb: `socklb agent --packet-lb --devices eth0` per node (nsenter
//     --net, so bpffs and cgroup2 stay visible), each on a fresh child
//     cgroup and a private bpffs;
//   - iptables, nftables: kube-proxy v1.37.2 per node (`ip netns exec`:
//     its rules, its sysctls and /sys are the node's).
//
// Two Services, NodePort with externalTrafficPolicy Cluster, give the two
// cases: "local", whose one endpoint is node 1's pod (DNAT only), and
// "remote", whose one endpoint is node 2's pod (DNAT and SNAT, the reply
// back through node 1). The outside client connects to node 1's address at
// their NodePorts. Beside them, the N-4 filler Services of the ClusterIP
// scenario (plus its target and probe): a NodePort packet meets
// kube-proxy's iptables rules after the ClusterIP ones. The agents are
// stopped before the rounds, as in the ClusterIP scenario: socklb's pinned
// links and maps and kube-proxy's rules keep serving.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
)

// extCase is one NodePort Service of the external scenario and the pod
// behind it.
type extCase struct {
	name     string // local, remote
	svc      string // the Service
	node     int    // the backend pod's node (1-based)
	pod      string // the lab's name of the pod
	podIP    string // its address (internal/lab's plan)
	id       string // its server's reply byte
	tcpNP    int32  // NodePorts
	udpNP    int32
	srcPorts int // the full-sync probe's source ports (see request.SrcPorts)
}

// The multi-node lab's addresses (internal/lab/doc.go), checked against
// the lab once it is built.
const (
	extNode1IP = "10.250.0.11"
	extNode2IP = "10.250.0.12"
)

var extCases = []extCase{
	{name: "local", svc: "ext-local", node: 1, pod: "n1-p1", podIP: "10.244.1.11", id: "l", tcpNP: 30080, udpNP: 30053, srcPorts: 10000},
	{name: "remote", svc: "ext-remote", node: 2, pod: "n2-p1", podIP: "10.244.2.11", id: "r", tcpNP: 30081, udpNP: 30054, srcPorts: 20000},
}

// extServices is how many Services the external scenario adds to the
// ClusterIP scenario's fillers, target and probe: N counts them.
var extServices = len(extCases)

// extNodeNames are the Node objects, one per lab node, with the lab's
// underlay addresses: kube-proxy's --hostname-override and socklb's
// --node-name, and where both find their node's address.
var extNodeNames = []struct{ name, ip string }{{"n1", extNode1IP}, {"n2", extNode2IP}}

// setupExternal creates the Nodes and the NodePort Services of the
// external scenario.
func (o *objects) setupExternal(ctx context.Context) error {
	for _, n := range extNodeNames {
		node, err := o.c.CoreV1().Nodes().Create(ctx, testkit.Node(n.name, ""), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}, {Type: corev1.NodeHostName, Address: n.name}}
		if _, err := o.c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.name, err)
		}
	}
	o.others += len(extCases) // N counts them
	for _, c := range extCases {
		svc := service(c.svc,
			corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(tcpPort), Protocol: corev1.ProtocolTCP, NodePort: c.tcpNP},
			corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(udpPort), Protocol: corev1.ProtocolUDP, NodePort: c.udpNP},
		)
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		if _, err := o.c.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("service %s: %w", c.svc, err)
		}
		s := testkit.EndpointSlice(benchNS+"/"+c.svc, c.svc, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{
			tcpEP("http"), testkit.EndpointPort("dns", corev1.ProtocolUDP, udpPort),
		}, testkit.OnNode(extNodeNames[c.node-1].name, testkit.ReadyEndpoint(c.podIP)))
		s.Labels[discoveryv1.LabelManagedBy] = managedBy
		if _, err := o.c.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("slice %s: %w", c.svc, err)
		}
	}
	return nil
}

// extPlane is one dataplane of the external scenario: its multi-node lab,
// an agent per node, and the measuring client on the outside machine.
// The embedded dataplane holds the name, the undo stack, the servers and
// the client.
type extPlane struct {
	dataplane
	m      *lab.MultiNode
	agents []*extAgent
}

// extAgent is the dataplane's agent on one node.
type extAgent struct {
	node *lab.Node
	proc *testkit.Proc
	fs   *testkit.BPFFS // socklb's pins
}

// addrs are where the outside client sends case c's TCP and UDP traffic.
func (d *extPlane) addrs(c extCase) (tcp, udp string) {
	if d.name == "direct" {
		return fmt.Sprintf("%s:%d", c.podIP, tcpPort), fmt.Sprintf("%s:%d", c.podIP, udpPort)
	}
	return fmt.Sprintf("%s:%d", extNode1IP, c.tcpNP), fmt.Sprintf("%s:%d", extNode1IP, c.udpNP)
}

// newExtLab builds the lab, checks its addresses against the objects',
// and starts each case's server in its pod.
func (d *extPlane) newExtLab() error {
	var err error
	if d.m, err = lab.NewMultiNode(lab.MultiNodeConfig{Nodes: 2, PodsPerNode: 1, TCPPort: tcpPort, UDPPort: udpPort}); err != nil {
		return err
	}
	d.push(d.m.Close)
	for i, n := range extNodeNames {
		if got := d.m.Node(i + 1).IP.String(); got != n.ip {
			return fmt.Errorf("lab node %d has %s, the Node object %s says %s", i+1, got, n.name, n.ip)
		}
	}
	for _, c := range extCases {
		p := d.m.Pod(c.pod)
		if p == nil || p.IP.String() != c.podIP {
			return fmt.Errorf("lab pod %s: %v, the EndpointSlice says %s", c.pod, p, c.podIP)
		}
		if err := d.serve(p.NetNS, c.id[0]); err != nil {
			return err
		}
	}
	// Sequential clients reuse ports quickly; this is per namespace.
	return run("ip", "netns", "exec", d.m.Outside.NetNS, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1")
}

// startExt starts the dataplane on every node (direct: the outside's
// routes to the pod CIDRs instead).
func (d *extPlane) startExt() error {
	for _, node := range d.m.Nodes {
		switch d.name {
		case "direct":
			if err := d.m.RouteVia(node.PodCIDR, node.Index); err != nil {
				return err
			}
			continue
		case "socklb":
			a, err := d.startSocklbOn(node)
			if err != nil {
				return err
			}
			d.agents = append(d.agents, a)
		case "iptables", "nftables":
			kubeconfig, err := d.bridgeAPIServer(node.NetNS, "-"+node.Name)
			if err != nil {
				return err
			}
			p, err := d.runKubeProxy(node.NetNS, node.Name, kubeconfig, "-"+node.Name)
			if err != nil {
				return err
			}
			d.agents = append(d.agents, &extAgent{node: node, proc: p})
		default:
			return fmt.Errorf("unknown dataplane %q", d.name)
		}
	}
	return nil
}

// startSocklbOn runs socklb's agent inside node's network namespace with
// the per-packet path on its eth0, on a fresh child cgroup (which holds
// nothing: no socket of the scenario is a pod's) and a private bpffs.
func (d *extPlane) startSocklbOn(node *lab.Node) (*extAgent, error) {
	cg, err := lab.NewCgroup()
	if err != nil {
		return nil, err
	}
	d.push(cg.Close)
	fs, err := testkit.NewBPFFS()
	if err != nil {
		return nil, err
	}
	d.push(fs.Close)
	// Registered before the agent starts, run after it stopped: unpinning
	// detaches the hooks and the device links.
	d.push(func() error { return testkit.CleanupPins(d.cfg.socklb, fs.Path()) })
	kubeconfig, err := d.bridgeAPIServer(node.NetNS, "-"+node.Name)
	if err != nil {
		return nil, err
	}
	cmd := node.Command(context.Background(), d.cfg.socklb, "agent",
		"--kubeconfig", kubeconfig,
		"--node-name", node.Name,
		"--cgroup-path", cg.Path(),
		"--bpffs-path", fs.Path(),
		"--packet-lb", "--devices", node.Device.Name,
		// Inside the node's namespace: nothing else listens there.
		"--healthz-bind-address", "127.0.0.1:10256",
		"--metrics-bind-address", extMetrics,
	)
	p, err := testkit.StartProcCmd("socklb agent on "+node.Name, filepath.Join(d.dir, "socklb-agent-"+node.Name+".log"), cmd)
	if err != nil {
		return nil, err
	}
	d.push(func() error { p.Stop(10 * time.Second); return nil })
	return &extAgent{node: node, proc: p, fs: fs}, nil
}

// extMetrics is socklb's metrics address inside each node's namespace.
const extMetrics = "127.0.0.1:10249"

// programmedOn counts the ClusterIP frontends the agent on node has
// programmed, and whether its sync is complete (socklb: every frontend
// of its desired state programmed).
func (d *extPlane) programmedOn(a *extAgent) (int, bool, error) {
	switch d.name {
	case "socklb":
		body, err := scrapeIn(a.node.NetNS, extMetrics)
		if err != nil {
			return 0, false, err
		}
		got, ok1 := testkit.Sample(body, "socklb_frontends_programmed")
		want, ok2 := testkit.Sample(body, "socklb_frontends")
		if !ok1 || !ok2 {
			return 0, false, errors.New("no socklb_frontends(_programmed) yet")
		}
		return int(got), got == want, nil
	default:
		n, err := kubeProxyProgrammed(d.name, a.node.NetNS)
		return n, true, err
	}
}

// scrapeIn GETs /metrics at addr inside the namespace ns: the socket is
// made there (lab.InNetNS), the request then runs on it from here.
func scrapeIn(ns, addr string) (string, error) {
	var c net.Conn
	if err := lab.InNetNS(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET http://%s/metrics in %s: status %d", addr, ns, resp.StatusCode)
	}
	return string(b), nil
}

// prepareExternal builds the dataplane's lab, starts its agents, waits
// until both NodePorts answer from the outside through node 1 and every
// node has programmed every Service, then stops the agents.
func prepareExternal(ctx context.Context, d *extPlane, n int, self string) (notes []string, err error) {
	if err := d.newExtLab(); err != nil {
		return nil, err
	}
	started := time.Now()
	if err := d.startExt(); err != nil {
		return nil, err
	}
	if err := d.startClientIn(ctx, self, d.m.Outside.NetNS, nil); err != nil {
		return nil, err
	}
	if d.name == "direct" {
		return nil, nil
	}
	// Synced: each NodePort answers through node 1 from its pod, and each
	// node has programmed the N-4 fillers (one port), target (2), probe
	// (1) and the two NodePort Services (2 each).
	want := n + 3
	deadline := started.Add(d.cfg.syncTimeout)
	for _, c := range extCases {
		tcp, _ := d.addrs(c)
		resp, err := d.client.do(request{Op: "probe", Addr: tcp, Want: c.id, Timeout: time.Until(deadline), Interval: 2 * time.Millisecond,
			ConnectTimeout: 100 * time.Millisecond, SrcPorts: c.srcPorts})
		if err != nil {
			return nil, err
		}
		if resp.Seen == 0 {
			d.unsynced = fmt.Sprintf("N=%d %s: not synced within %s (%s never answered through %s: %s); its figures are null", n, d.name, d.cfg.syncTimeout, c.pod, tcp, resp.FirstError)
			break
		}
	}
	for _, a := range d.agents {
		if d.unsynced != "" {
			break
		}
		for {
			got, complete, err := d.programmedOn(a)
			if err == nil && got >= want && complete {
				break
			}
			if !a.proc.Alive() {
				return nil, fmt.Errorf("%s on %s: %w", d.name, a.node.Name, a.proc.ExitedErr())
			}
			if time.Now().After(deadline) {
				d.unsynced = fmt.Sprintf("N=%d %s: not synced within %s (%s: %d of %d frontends programmed, %v); its figures are null", n, d.name, d.cfg.syncTimeout, a.node.Name, got, want, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if d.unsynced != "" {
		logf("%s", d.unsynced)
	} else {
		logf("%s synced on every node in %.1fs", d.name, time.Since(started).Seconds())
	}
	// kube-proxy's sysctls land in the node's namespace, never the host's.
	if d.name == "iptables" || d.name == "nftables" {
		var vals []string
		for _, a := range d.agents {
			out, err := runOut("ip", "netns", "exec", a.node.NetNS, "cat", "/proc/sys/net/ipv4/conf/all/route_localnet")
			if err != nil {
				return nil, err
			}
			vals = append(vals, a.node.Name+" "+strings.TrimSpace(out))
		}
		host, _ := os.ReadFile("/proc/sys/net/ipv4/conf/all/route_localnet")
		note := fmt.Sprintf("N=%d %s: net.ipv4.conf.all.route_localnet with kube-proxy started on every node: %s; the host: %s", n, d.name, strings.Join(vals, ", "), strings.TrimSpace(string(host)))
		logf("%s", note)
		notes = append(notes, note)
	}
	for _, a := range d.agents {
		if d.name == "socklb" {
			a.proc.Stop(10 * time.Second)
		} else {
			stopKubeProxy(a.proc)
		}
	}
	return notes, nil
}

// runOut runs a command and returns its output.
func runOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// externalSizeRun measures every dataplane of the external scenario with
// n Services in place.
func externalSizeRun(ctx context.Context, cfg *config, cp *cluster.ControlPlane, n int, dir, self string, gave gaveUp) (so sizeOut, err error) {
	var ds []*extPlane
	defer func() {
		for i := len(ds) - 1; i >= 0; i-- {
			if cerr := ds[i].close(); cerr != nil {
				logf("cleanup of %s: %v", ds[i].name, cerr)
				err = errors.Join(err, cerr)
			}
		}
	}()
	var skipped []ExternalRun
	for _, name := range cfg.dataplanes {
		if err := ctx.Err(); err != nil {
			return so, err
		}
		if note := gave.note(name, cfg.syncTimeout); note != "" {
			logf("=== N=%d %s: %s", n, name, note)
			for _, c := range extCases {
				skipped = append(skipped, ExternalRun{NServices: n, Case: c.name, Dataplane: name, Backend: c.pod, Note: note})
			}
			so.notes = append(so.notes, fmt.Sprintf("N=%d %s: %s", n, name, note))
			continue
		}
		logf("=== N=%d %s (external)", n, name)
		ddir := filepath.Join(dir, fmt.Sprintf("%d-%s", n, name))
		if err := os.MkdirAll(ddir, 0o755); err != nil {
			return so, err
		}
		d := &extPlane{dataplane: dataplane{name: name, cfg: cfg, cp: cp, dir: ddir}}
		ds = append(ds, d)
		notes, err := prepareExternal(ctx, d, n, self)
		if err != nil {
			for _, a := range d.agents {
				logf("last lines of %s:\n%s", a.proc.LogPath, a.proc.Tail(30))
			}
			return so, fmt.Errorf("%s: %w", name, err)
		}
		so.notes = append(so.notes, notes...)
	}
	var live []*extPlane
	for _, d := range ds {
		if d.unsynced != "" {
			so.notes = append(so.notes, d.unsynced)
			gave.record(d.name, n)
			for _, c := range extCases {
				so.ext = append(so.ext, ExternalRun{NServices: n, Case: c.name, Dataplane: d.name, Backend: c.pod,
					Note: fmt.Sprintf("did not sync within %s", cfg.syncTimeout)})
			}
			continue
		}
		live = append(live, d)
	}
	names := make([]string, len(live))
	for i, d := range live {
		names[i] = d.name
	}
	logf("=== N=%d external connect and UDP rounds, %s in turn", n, strings.Join(names, ", "))
	runs, hooks, err := externalRounds(cfg, live, n)
	if err != nil {
		return so, err
	}
	// kube-proxy's NAT is conntrack's, in each node's own table.
	for _, d := range live {
		if d.name != "iptables" && d.name != "nftables" {
			continue
		}
		var counts []string
		for _, a := range d.agents {
			out, err := runOut("ip", "netns", "exec", a.node.NetNS, "cat", "/proc/sys/net/netfilter/nf_conntrack_count")
			if err != nil {
				return so, err
			}
			counts = append(counts, a.node.Name+" "+strings.TrimSpace(out))
		}
		note := fmt.Sprintf("N=%d %s: conntrack entries in the nodes' namespaces after the rounds: %s", n, d.name, strings.Join(counts, ", "))
		logf("%s", note)
		so.notes = append(so.notes, note)
	}
	so.ext = append(so.ext, runs...)
	so.ext = append(so.ext, skipped...)
	so.hooks = hooks
	return so, nil
}

// externalRounds runs the connect and UDP rounds from the outside machine,
// each round going through every lab and case in turn, then one more
// round of socklb's with bpf_stats on for its device programs' cost.
func externalRounds(cfg *config, ds []*extPlane, n int) ([]ExternalRun, []HookCost, error) {
	type figures struct {
		rate, p50, p99, udp []float64
		saw                 string
		connects            int
		synRetrans, paws    int64
	}
	fig := make([][]figures, len(ds))
	for i, d := range ds {
		fig[i] = make([]figures, len(extCases))
		for j, c := range extCases { // warm-up: neighbours, page cache, conntrack
			tcp, udp := d.addrs(c)
			if _, err := d.client.do(request{Op: "tcp", Addr: tcp, Count: 100}); err != nil {
				return nil, nil, err
			}
			if _, err := d.client.do(request{Op: "udp", Addr: udp, Count: 100}); err != nil {
				return nil, nil, err
			}
			resp, err := d.client.do(request{Op: "peer", Addr: tcp})
			if err != nil {
				return nil, nil, err
			}
			if resp.OK != 1 || resp.Replies[c.id] != 1 {
				return nil, nil, fmt.Errorf("%s, case %s: asking %s for the source it saw: %v (%s)", d.name, c.name, tcp, resp.Replies, resp.FirstError)
			}
			fig[i][j].saw = resp.Peer
			logf("%s, case %s: %s answered by %s, which saw the connection come from %s", d.name, c.name, tcp, c.pod, resp.Peer)
		}
	}
	check := func(d *extPlane, c extCase, what, addr string, count int, resp response) error {
		if resp.Errors*100 > count || resp.Replies[c.id] != resp.OK {
			return fmt.Errorf("%s, case %s: %s to %s: %d ok, %d errors (%s), replies %v (want all from %q)", d.name, c.name, what, addr, resp.OK, resp.Errors, resp.FirstError, resp.Replies, c.id)
		}
		if resp.Errors > 0 {
			logf("%s, case %s: %d of %d %s failed (%s)", d.name, c.name, resp.Errors, count, what, resp.FirstError)
		}
		return nil
	}
	for k := 0; k < cfg.rounds; k++ {
		for i, d := range ds {
			for j, c := range extCases {
				tcp, _ := d.addrs(c)
				cli0, pod0, err := d.tcpCounters(c)
				if err != nil {
					return nil, nil, err
				}
				resp, err := d.client.do(request{Op: "tcp", Addr: tcp, Count: cfg.connects})
				if err != nil {
					return nil, nil, err
				}
				cli1, pod1, err := d.tcpCounters(c)
				if err != nil {
					return nil, nil, err
				}
				if err := check(d, c, "connects", tcp, cfg.connects, resp); err != nil {
					return nil, nil, err
				}
				f := &fig[i][j]
				f.connects += cfg.connects
				f.synRetrans += cli1["TcpExt.TCPSynRetrans"] - cli0["TcpExt.TCPSynRetrans"]
				f.paws += pod1["TcpExt.PAWSTimewait"] - pod0["TcpExt.PAWSTimewait"]
				f.rate = append(f.rate, float64(resp.OK)/resp.Elapsed.Seconds())
				f.p50 = append(f.p50, float64(resp.P50)/1e3)
				f.p99 = append(f.p99, float64(resp.P99)/1e3)
			}
		}
	}
	for k := 0; k < cfg.rounds; k++ {
		for i, d := range ds {
			for j, c := range extCases {
				_, udp := d.addrs(c)
				resp, err := d.client.do(request{Op: "udp", Addr: udp, Count: cfg.udp})
				if err != nil {
					return nil, nil, err
				}
				if err := check(d, c, "UDP request/responses", udp, cfg.udp, resp); err != nil {
					return nil, nil, err
				}
				fig[i][j].udp = append(fig[i][j].udp, float64(resp.OK)/resp.Elapsed.Seconds())
			}
		}
	}
	var hooks []HookCost
	for _, d := range ds {
		if d.name != "socklb" {
			continue
		}
		hc, err := d.deviceCost(cfg, n)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: the bpf_stats round: %w", d.name, err)
		}
		hooks = append(hooks, hc)
	}
	var out []ExternalRun
	for i, d := range ds {
		for j, c := range extCases {
			f := fig[i][j]
			tcp, udp := d.addrs(c)
			r := ExternalRun{NServices: n, Case: c.name, Dataplane: d.name, Backend: c.pod, Addr: tcp, UDPAddr: udp, BackendSaw: f.saw,
				ConnectsPerS: fptr(median(f.rate)), ConnectP50us: fptr(median(f.p50)), ConnectP99us: fptr(median(f.p99)), UDPRRPerS: fptr(median(f.udp)),
				ConnectsPerSRounds: rounded(f.rate), UDPRRPerSRounds: rounded(f.udp),
				ConnectsMeasured: f.connects, SynRetrans: &f.synRetrans, BackendPAWSTimewait: &f.paws}
			logf("%-8s %-6s TCP %.0f connects/s (rounds %v), connect p50 %.1fµs p99 %.1fµs, %d SYNs sent again, %d refused by the backend's TIME_WAIT (PAWS) in %d connects; UDP %.0f req/s (rounds %v)",
				d.name, c.name, *r.ConnectsPerS, round0(f.rate), *r.ConnectP50us, *r.ConnectP99us, f.synRetrans, f.paws, f.connects, *r.UDPRRPerS, round0(f.udp))
			out = append(out, r)
		}
	}
	return out, hooks, nil
}

// rounded is v with fptr's rounding.
func rounded(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = *fptr(x)
	}
	return out
}

// tcpCounters reads the TCP counters of the outside machine's namespace
// and of case c's backend pod's.
func (d *extPlane) tcpCounters(c extCase) (client, pod map[string]int64, err error) {
	if client, err = netCounters(d.m.Outside.NetNS); err != nil {
		return nil, nil, err
	}
	pod, err = netCounters(d.m.Pod(c.pod).NetNS)
	return client, pod, err
}

// netCounters reads /proc/net/snmp and /proc/net/netstat of the namespace
// ns ("TcpExt.TCPSynRetrans" -> value): through /proc/thread-self, which
// answers for the thread's namespace (lab.InNetNS moves one thread;
// /proc/self/net would answer for the process's).
func netCounters(ns string) (map[string]int64, error) {
	out := map[string]int64{}
	err := lab.InNetNS(ns, func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			for i := 0; i+1 < len(lines); i += 2 {
				keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
				if len(keys) != len(vals) || len(keys) == 0 || keys[0] != vals[0] {
					return fmt.Errorf("%s in %s: unexpected lines %q / %q", f, ns, lines[i], lines[i+1])
				}
				group := strings.TrimSuffix(keys[0], ":")
				for k := 1; k < len(keys); k++ {
					v, err := strconv.ParseInt(vals[k], 10, 64)
					if err != nil {
						continue // a signed or odd field (Tcp MaxConn -1 parses; others skipped)
					}
					out[group+"."+keys[k]] = v
				}
			}
		}
		return nil
	})
	return out, err
}

// deviceCost runs one more connect and UDP round per case with the
// kernel's BPF run-time stats on, and reads what socklb's device programs
// on each node (the pinned links dev-eth0-ingress and -egress) cost per
// call, that is per packet. Hook names: "<case> <node>/<link>".
func (d *extPlane) deviceCost(cfg *config, n int) (HookCost, error) {
	out := HookCost{NServices: n, Hooks: map[string]HookCall{}}
	for _, c := range extCases {
		progs := datapath.HookPrograms{}
		h := &hookCounter{progs: progs, sum: map[string]datapath.HookStats{}}
		err := func() error {
			defer h.close()
			for _, a := range d.agents {
				dev := a.node.Device.Name
				ps, err := datapath.OpenHookPrograms(a.fs.Path(), "dev-"+dev+"-ingress", "dev-"+dev+"-egress")
				if err != nil {
					return err
				}
				for name, p := range ps {
					progs[a.node.Name+"/"+name] = p
				}
			}
			tcp, udp := d.addrs(c)
			return h.around(func() error {
				if _, err := d.client.do(request{Op: "tcp", Addr: tcp, Count: cfg.connects}); err != nil {
					return err
				}
				_, err := d.client.do(request{Op: "udp", Addr: udp, Count: cfg.udp})
				return err
			})
		}()
		if err != nil {
			return out, err
		}
		for name, call := range h.result(n).Hooks {
			out.Hooks[c.name+" "+name] = call
		}
	}
	for _, name := range slices.Sorted(mapKeys(out.Hooks)) {
		if c := out.Hooks[name]; c.NSPerCall != nil {
			logf("%s: %s %.0f ns/packet over %d packets (bpf_stats)", d.name, name, *c.NSPerCall, c.RunCount)
		}
	}
	return out, nil
}
