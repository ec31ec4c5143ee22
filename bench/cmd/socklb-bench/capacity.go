package main

// The capacity case of #22: 100 000 Services of 10 endpoints and 2 ports,
// a tenth of them NodePorts, on a node with 4 NodePort addresses, must fit
// socklb's default maps. After the sizes' runs, --capacity N rewrites the
// fillers in that shape (into etcd, as they were written), makes the
// target a NodePort, gives the Node 4 addresses, and runs socklb alone with
// its default map sizes: its full sync, whether its own metrics show every
// frontend programmed and no Service refused, how full each map is, its
// map memory and RSS, and connects through the target's NodePort at each
// Node address. Figures, not assertions: a case that does not fit is
// recorded as such.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/testkit"
)

const (
	capacityPorts         = 2
	capacityNodePortEvery = 10
	// The target's NodePorts, in the API server's default range.
	targetNodePortTCP = 30080
	targetNodePortUDP = 30053
	nodePortTries     = 100
)

// capacityNodeAddrs are the Node's addresses in the capacity case: the
// client's own (the Node's InternalIP in every run) and three more, none
// routed anywhere: a connect to one is translated at connect() or fails.
var capacityNodeAddrs = []string{"10.244.0.1", "10.250.9.2", "10.250.9.3", "10.250.9.4"}

// reshape makes the objects the capacity case's: n Services in all, the
// fillers rewritten with capacityPorts ports and every
// capacityNodePortEvery-th a NodePort, the target a NodePort, the Node
// with capacityNodeAddrs.
func (o *objects) reshape(ctx context.Context, n int) error {
	if o.etcd == "" {
		return fmt.Errorf("the capacity case writes its fillers into etcd: run with --fill etcd")
	}
	o.shape = shape{ports: capacityPorts, nodePortEvery: capacityNodePortEvery}
	want := n - o.others
	start := time.Now()
	if err := o.growEtcd(ctx, 0, want); err != nil {
		return err
	}
	o.fillers = want
	// The API server's cache must hold the new shape before an agent
	// lists: the last filler written, read from the cache.
	last := fmt.Sprintf("fill-%d", want-1)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		svc, err := o.c.CoreV1().Services(benchNS).Get(ctx, last, metav1.GetOptions{ResourceVersion: "0"})
		if err == nil && len(svc.Spec.Ports) == capacityPorts {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server's cache never showed %s with %d ports (%v)", last, capacityPorts, err)
		}
	}
	logf("capacity case: %d fillers rewritten with %d ports, every %d-th a NodePort, in %s", want, capacityPorts, capacityNodePortEvery, time.Since(start).Round(time.Millisecond))

	tgt, err := o.c.CoreV1().Services(benchNS).Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		return err
	}
	tgt.Spec.Type = corev1.ServiceTypeNodePort
	for i := range tgt.Spec.Ports {
		tgt.Spec.Ports[i].NodePort = targetNodePortTCP
		if tgt.Spec.Ports[i].Protocol == corev1.ProtocolUDP {
			tgt.Spec.Ports[i].NodePort = targetNodePortUDP
		}
	}
	if _, err := o.c.CoreV1().Services(benchNS).Update(ctx, tgt, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("making the target a NodePort: %w", err)
	}
	node, err := o.c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: nodeName}}
	for _, a := range capacityNodeAddrs {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	if _, err := o.c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node addresses: %w", err)
	}
	return nil
}

// capacityFrontends is how many frontends the capacity case's objects ask
// for: each filler port's ClusterIP and, for the NodePorts, one NodePort
// frontend per port (whatever the Node's addresses); the probe's one; the
// target's two ports, each a ClusterIP and a NodePort.
func capacityFrontends(fillers int) int {
	nodePorts := (fillers + capacityNodePortEvery - 1) / capacityNodePortEvery
	return fillers*capacityPorts + nodePorts*capacityPorts + 1 + 4
}

// capacityRun runs socklb on the capacity case's objects.
func capacityRun(ctx context.Context, cfg *config, cp *cluster.ControlPlane, o *objects, n int, dir, self string) (c Capacity, err error) {
	c = Capacity{NServices: n, Ports: capacityPorts, EndpointsPerService: endpointsPerService,
		NodePortServices: (o.fillers+capacityNodePortEvery-1)/capacityNodePortEvery + 1, NodeAddresses: capacityNodeAddrs,
		NodePortAnswers: map[string]int{}, NodePortTries: nodePortTries, MapPressure: map[string]float64{}}
	ddir := filepath.Join(dir, fmt.Sprintf("capacity-%d-socklb", n))
	if err := os.MkdirAll(ddir, 0o755); err != nil {
		return c, err
	}
	d := &dataplane{name: "socklb", cfg: cfg, cp: cp, dir: ddir}
	defer func() {
		if cerr := d.close(); cerr != nil {
			logf("cleanup of the capacity case: %v", cerr)
			err = errors.Join(err, cerr)
		}
	}()
	if err := d.newLab(); err != nil {
		return c, err
	}
	startedAt, err := d.start(ctx)
	if err != nil {
		return c, err
	}
	if err := d.startClient(ctx, self); err != nil {
		return c, err
	}
	tcpAddr, _ := d.addrs(o)
	resp, err := d.client.do(request{Op: "probe", Addr: tcpAddr, Want: "t", Timeout: cfg.syncTimeout, Interval: 2 * time.Millisecond, ConnectTimeout: 20 * time.Millisecond, SrcPorts: 10000})
	if err != nil {
		return c, err
	}
	if resp.Seen == 0 {
		c.Note = fmt.Sprintf("the target never answered through its ClusterIP within %s", cfg.syncTimeout)
		logf("capacity case: %s", c.Note)
		return c, nil
	}
	// Synced once every frontend asked for is programmed, or the agent
	// says it refused some.
	want := capacityFrontends(o.fillers)
	var body string
	for {
		if body, err = testkit.Scrape(d.metrics); err != nil {
			return c, err
		}
		prog, _ := testkit.Sample(body, "socklb_frontends_programmed")
		desired, _ := testkit.Sample(body, "socklb_frontends")
		if int(desired) >= want && prog == desired || strings.Contains(body, "socklb_refused_services{") {
			break
		}
		if !d.agent.Alive() {
			return c, d.agent.ExitedErr()
		}
		if time.Since(startedAt) > cfg.syncTimeout {
			c.Note = fmt.Sprintf("not synced within %s: %.0f of %.0f frontends programmed (%d asked for)", cfg.syncTimeout, prog, desired, want)
			logf("capacity case: %s", c.Note)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.FullSyncS = fptr(time.Since(startedAt).Seconds())
	if u, err := d.usage(); err == nil {
		c.AgentRSSMiB, c.AgentPeakRSSMiB = fptr(u.rssMiB), fptr(u.peakMiB)
	}
	readCapacity(body, &c)
	if cfg.bpftool {
		mb, err := d.mapMemory()
		if err != nil {
			return c, err
		}
		var total int64
		for _, b := range mb {
			total += b
		}
		c.MapMiB = fptr(float64(total) / (1 << 20))
	}
	for _, a := range capacityNodeAddrs {
		r, err := d.client.do(request{Op: "tcp", Addr: fmt.Sprintf("%s:%d", a, targetNodePortTCP), Count: nodePortTries})
		if err != nil {
			return c, err
		}
		c.NodePortAnswers[a] = r.Replies["t"]
	}
	logf("capacity case: %d of %d frontends and %d of %d slots programmed, %d Services refused, map pressure %v, maps %.1f MiB, full sync %.1fs, NodePort answers %v of %d",
		c.FrontendsProgrammed, c.Frontends, c.SlotsProgrammed, c.Slots, c.RefusedServices, c.MapPressure, deref(c.MapMiB), *c.FullSyncS, c.NodePortAnswers, nodePortTries)
	d.stopAgent()
	return c, nil
}

// readCapacity fills c from a scrape of socklb's /metrics.
func readCapacity(body string, c *Capacity) {
	get := func(name string) int { v, _ := testkit.Sample(body, name); return int(v) }
	c.Frontends, c.FrontendsProgrammed = get("socklb_frontends"), get("socklb_frontends_programmed")
	c.Slots, c.SlotsProgrammed = get("socklb_backends"), get("socklb_backends_programmed")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "socklb_refused_services{") {
			c.RefusedServices++
		}
		rest, ok := strings.CutPrefix(line, `socklb_bpf_map_pressure{map="`)
		if !ok {
			continue
		}
		name, val, ok := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); ok && err == nil {
			c.MapPressure[name] = v
		}
	}
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}
