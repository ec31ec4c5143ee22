package main

// One dataplane in its own netns lab: the lab (a client namespace and the
// target, pa and pb pod namespaces, no default route anywhere), the
// dataplane (none, the socklb agent on a fresh child cgroup and a private
// bpffs, or kube-proxy inside the client namespace), and the measuring
// client inside the client namespace.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
)

type dataplane struct {
	name    string // direct, socklb, iptables, nftables
	cfg     *config
	cp      *cluster.ControlPlane
	dir     string
	lab     *lab.Lab
	cli     *lab.Client
	cg      *lab.Cgroup
	fs      *testkit.BPFFS
	agent   *testkit.Proc // socklb or kube-proxy
	metrics string        // socklb's metrics address
	client  *clientProc
	undo    []func() error
	// unsynced says why the dataplane was not measured (no full sync
	// within --sync-timeout); empty when it was.
	unsynced string
	maps     *MapMem // socklb's map memory after its full sync
	churn    *Churn  // the agent after --churn
	// socklb's profiles, and why one is missing (a note of the run: a
	// profile is worth a line, not the run).
	prof         *profiler
	profiles     []Profile
	profileNotes []string
}

func (d *dataplane) push(f func() error) { d.undo = append(d.undo, f) }

// close undoes everything in reverse order and returns every error.
func (d *dataplane) close() error {
	var errs []error
	for i := len(d.undo) - 1; i >= 0; i-- {
		if err := d.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	d.undo = nil
	return errors.Join(errs...)
}

// newLab builds the lab and starts the pods' servers: each answers one
// byte with its own letter (t, a, b), over TCP and UDP.
func (d *dataplane) newLab() error {
	var err error
	d.lab, err = lab.New(lab.Config{Pods: []lab.PodSpec{
		{Name: "t", IP: targetIP}, {Name: "a", IP: podAIP}, {Name: "b", IP: podBIP},
	}})
	if err != nil {
		return err
	}
	d.push(d.lab.Close)
	d.cli = d.lab.Client("")
	for _, p := range d.lab.Pods() {
		if err := d.serve(p.NetNS, p.Name[0]); err != nil {
			return err
		}
	}
	// Sequential clients reuse ports quickly; this is per namespace.
	return run("ip", "netns", "exec", d.cli.NetNS, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1")
}

// serve runs the one-byte TCP and UDP servers of a pod: `socklb-bench
// server <id>` in the pod's namespace, on the same CPU as the client (see
// --cpu), so that a request/response is one CPU's work and runs vary less.
func (d *dataplane) serve(ns string, id byte) error {
	cmd := exec.Command("taskset", "-c", strconv.Itoa(d.cfg.cpu), "ip", "netns", "exec", ns, d.cfg.self, "server", string(id))
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	p, err := testkit.StartProcCmd("server "+string(id), filepath.Join(d.dir, "server-"+string(id)+".log"), cmd)
	if err != nil {
		return err
	}
	d.push(func() error { p.Stop(5 * time.Second); return nil })
	return p.WaitFor("listening", 10*time.Second, func() error {
		return lab.InNetNS(ns, func() error {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort), time.Second)
			if err == nil {
				_, _ = c.Write([]byte{'?'})
				c.Close()
			}
			return err
		})
	})
}

// serverMain is `socklb-bench server <id>`: answers every TCP connection's
// byte and every UDP datagram with id, until killed. A TCP connection whose
// byte is askPeer gets id, a space and the source address it came from.
func serverMain(id string) error {
	ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", tcpPort))
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp4", fmt.Sprintf(":%d", udpPort))
	if err != nil {
		return err
	}
	reply := []byte(id[:1])
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(reply, from)
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			var b [1]byte
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, b[:]); err == nil {
				if b[0] == askPeer {
					// Who connected: the client, or a node that SNATed it.
					_, _ = c.Write(append(append(reply, ' '), c.RemoteAddr().(*net.TCPAddr).IP.String()...))
				} else {
					_, _ = c.Write(reply)
				}
			}
			c.Close()
		}()
	}
}

// start starts the dataplane and returns when it is started (not synced).
func (d *dataplane) start(ctx context.Context) (startedAt time.Time, err error) {
	switch d.name {
	case "direct":
		return time.Now(), nil
	case "socklb":
		return d.startSocklb()
	case "iptables", "nftables":
		return d.startKubeProxy(ctx)
	}
	return time.Time{}, fmt.Errorf("unknown dataplane %q", d.name)
}

func (d *dataplane) startSocklb() (time.Time, error) {
	var err error
	if d.cg, err = lab.NewCgroup(); err != nil {
		return time.Time{}, err
	}
	d.push(d.cg.Close)
	if d.fs, err = testkit.NewBPFFS(); err != nil {
		return time.Time{}, err
	}
	d.push(d.fs.Close)
	ports, err := testkit.FreePorts(2)
	if err != nil {
		return time.Time{}, err
	}
	d.metrics = fmt.Sprintf("127.0.0.1:%d", ports[1])
	// Registered before the agent starts, run after it stopped: detach.
	d.push(func() error {
		return testkit.CleanupPins(d.cfg.socklb, d.fs.Path())
	})
	at := time.Now()
	agent, err := testkit.StartAgent(d.cfg.socklb, filepath.Join(d.dir, "socklb-agent.log"),
		"--kubeconfig", d.cp.AdminKubeconfig,
		"--node-name", nodeName,
		"--cgroup-path", d.cg.Path(),
		"--bpffs-path", d.fs.Path(),
		"--healthz-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--metrics-bind-address", d.metrics,
		"--profiling",
	)
	if err != nil {
		return at, err
	}
	d.agent = agent.Proc
	d.push(func() error { d.agent.Stop(10 * time.Second); return nil })
	return at, nil
}

// startKubeProxy runs the real kube-proxy inside the client namespace,
// where its rules apply to the client's traffic and nowhere else.
func (d *dataplane) startKubeProxy(ctx context.Context) (time.Time, error) {
	ns := d.cli.NetNS
	// kube-proxy DNATs in OUTPUT, after the route lookup: the ClusterIP
	// range needs a route. Through the target pod's veth, so an
	// untranslated packet ends in a lab namespace (which drops it).
	if err := run("ip", "-n", ns, "route", "add", serviceCIDR, "dev", "vpod1", "src", d.cli.IP.String()); err != nil {
		return time.Time{}, err
	}
	kubeconfig, err := d.bridgeAPIServer(ns, "")
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	d.agent, err = d.runKubeProxy(ns, nodeName, kubeconfig, "")
	return at, err
}

// bridgeAPIServer makes the API server (127.0.0.1 of the host namespace)
// reachable from inside the namespace ns, at the same address: a socat
// listening on 127.0.0.1:<port> inside ns relays every connection through
// a socat in the API server's namespace. It returns a kubeconfig for that
// address. tag tells the files of several namespaces apart.
func (d *dataplane) bridgeAPIServer(ns, tag string) (kubeconfig string, err error) {
	port := strings.TrimPrefix(d.cp.Server[strings.LastIndex(d.cp.Server, ":"):], ":")
	bridge := filepath.Join(d.dir, "apiserver-bridge"+tag+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter --net=/proc/%d/ns/net socat STDIO TCP:127.0.0.1:%s\n", d.cp.APIServer.Pid(), port)
	if err := os.WriteFile(bridge, []byte(script), 0o755); err != nil {
		return "", err
	}
	socat, err := testkit.StartProc("socat"+tag, filepath.Join(d.dir, "socat"+tag+".log"), "ip", "netns", "exec", ns,
		"socat", fmt.Sprintf("TCP-LISTEN:%s,bind=127.0.0.1,fork,reuseaddr", port), "EXEC:"+bridge)
	if err != nil {
		return "", err
	}
	d.push(func() error { socat.Stop(5 * time.Second); return nil })
	if err := socat.WaitFor("the API server bridge", 10*time.Second, func() error {
		return lab.InNetNS(ns, func() error {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}); err != nil {
		return "", err
	}
	kubeconfig = filepath.Join(d.dir, "kubeconfig"+tag)
	if err := cluster.WriteKubeconfig(kubeconfig, d.cp.Server, d.cp.PKI.CAPEM, "admin", d.cp.AdminToken); err != nil {
		return "", err
	}
	return kubeconfig, nil
}

// runKubeProxy starts kube-proxy in d.name's mode inside the namespace ns
// (`ip netns exec`: its rules, its sysctls and /sys are the namespace's),
// as the node hostname, and registers its stop.
func (d *dataplane) runKubeProxy(ns, hostname, kubeconfig, tag string) (*testkit.Proc, error) {
	args := []string{"netns", "exec", ns, d.cfg.kubeProxy,
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=" + d.name,
		"--hostname-override=" + hostname,
		"--cluster-cidr=10.244.0.0/16",
		// Leave the machine's global sysctls alone.
		"--conntrack-max-per-core=0",
		"--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s",
		"--conntrack-tcp-timeout-close-wait=0s",
		"--conntrack-udp-timeout=0s",
		"--conntrack-udp-timeout-stream=0s",
		"--oom-score-adj=0",
		// In the namespace: nothing else listens there.
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
		"--v=1",
	}
	p, err := testkit.StartProc("kube-proxy "+d.name+tag, filepath.Join(d.dir, "kube-proxy"+tag+".log"), "ip", args...)
	if err != nil {
		return nil, err
	}
	d.push(func() error { stopKubeProxy(p); return nil })
	return p, nil
}

// stopKubeProxy stops kube-proxy and then the iptables-restore or nft it
// may have been running (a sync of 100 000 endpoints can outlive it).
func stopKubeProxy(p *testkit.Proc) {
	if !p.Alive() {
		return
	}
	var kids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.Pid()))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				kids = append(kids, pid)
			}
		}
	}
	p.Stop(10 * time.Second)
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// programmed counts the ClusterIP frontends the dataplane has programmed
// (service ports with endpoints).
func (d *dataplane) programmed() (int, error) {
	switch d.name {
	case "socklb":
		f, err := d.metric("socklb_frontends_programmed")
		return int(f), err
	case "iptables", "nftables":
		return kubeProxyProgrammed(d.name, d.cli.NetNS)
	}
	return 0, nil
}

// kubeProxyProgrammed counts the ClusterIP service ports kube-proxy in
// mode has programmed in the namespace ns.
func kubeProxyProgrammed(mode, ns string) (int, error) {
	switch mode {
	case "iptables":
		out, err := exec.Command("ip", "netns", "exec", ns, "iptables-save", "-t", "nat").Output()
		if err != nil {
			return 0, err
		}
		n := 0
		for _, l := range bytes.Split(out, []byte("\n")) {
			if bytes.HasPrefix(l, []byte("-A KUBE-SERVICES ")) && bytes.Contains(l, []byte("-j KUBE-SVC-")) {
				n++
			}
		}
		return n, nil
	case "nftables":
		out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "map", "ip", "kube-proxy", "service-ips").Output()
		if err != nil {
			return 0, nil // not created yet
		}
		return bytes.Count(out, []byte("goto service-")), nil
	}
	return 0, fmt.Errorf("kube-proxy mode %q", mode)
}

// metric reads one sample of the socklb agent's /metrics.
func (d *dataplane) metric(name string) (float64, error) { return testkit.Metric(d.metrics, name) }

// procUsage is a dataplane process's resident set now and at its peak
// (VmHWM), and its CPU time.
type procUsage struct{ rssMiB, peakMiB, cpuS float64 }

// usage is the dataplane process's resident set and CPU time (its own and
// its waited-for children's: kube-proxy's iptables-restore and nft runs).
func (d *dataplane) usage() (u procUsage, err error) {
	pid := d.agent.Pid()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		name, v, _ := strings.Cut(l, ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch name {
		case "VmRSS":
			u.rssMiB = kb / 1024
		case "VmHWM":
			u.peakMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the ")" that ends comm: state is field 3; utime,
	// stime, cutime, cstime are fields 14-17.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var ticks float64
	for _, i := range []int{14, 15, 16, 17} {
		v, _ := strconv.ParseFloat(f[i-3], 64)
		ticks += v
	}
	u.cpuS = ticks / 100 // USER_HZ is 100 on Linux
	return u, nil
}

// addrs are where the client connects: the target's ClusterIP, or for
// direct the target pod itself.
func (d *dataplane) addrs(o *objects) (tcp, udp string) {
	if d.name == "direct" {
		return fmt.Sprintf("%s:%d", targetIP, tcpPort), fmt.Sprintf("%s:%d", targetIP, udpPort)
	}
	return o.targetVIP + ":80", o.targetVIP + ":53"
}

// --- the measuring client ----------------------------------------------------

type clientProc struct {
	ctx  context.Context
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	errb *bytes.Buffer
}

// startClient runs `socklb-bench client` in the client namespace, in the
// dataplane's cgroup (placed there at clone time) if it has one.
func (d *dataplane) startClient(ctx context.Context, self string) error {
	return d.startClientIn(ctx, self, d.cli.NetNS, d.cg)
}

// startClientIn runs `socklb-bench client` in the namespace ns, in cg
// (placed there at clone time) unless cg is nil.
func (d *dataplane) startClientIn(ctx context.Context, self, ns string, cg *lab.Cgroup) error {
	cmd := exec.Command("taskset", "-c", strconv.Itoa(d.cfg.cpu), "ip", "netns", "exec", ns, self, "client")
	// No asynchronous preemption signals: they would interrupt the
	// blocking socket calls the client measures.
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cg.FD()
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	c := &clientProc{ctx: ctx, cmd: cmd, in: in, out: bufio.NewScanner(out), errb: &bytes.Buffer{}}
	cmd.Stderr = c.errb
	if err := cmd.Start(); err != nil {
		return err
	}
	d.client = c
	d.push(func() error {
		c.in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return nil
	})
	return nil
}

// do sends one request and waits for its answer; when ctx ends first (an
// interrupt) it kills the client, so that the cleanups run at once.
func (c *clientProc) do(req request) (response, error) {
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return response{}, fmt.Errorf("client: %w: %s", err, c.errb.String())
	}
	done := make(chan bool, 1)
	go func() { done <- c.out.Scan() }()
	var ok bool
	select {
	case ok = <-done:
	case <-c.ctx.Done():
		_ = c.cmd.Process.Kill()
		<-done
		return response{}, c.ctx.Err()
	}
	if !ok {
		return response{}, fmt.Errorf("client exited: %v: %s", c.out.Err(), c.errb.String())
	}
	var r response
	return r, json.Unmarshal(c.out.Bytes(), &r)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mapMemory is the kernel memory of each of socklb's pinned maps
// (<bpffs>/maps/<layout version>/<name>), as `bpftool map show` reports it: bytes_memlock,
// which on kernels since 6.4 is the map's actual memory use (for the
// BPF_F_NO_PREALLOC hashes it grows with the entries; LRU and array maps
// are preallocated at max_entries).
func (d *dataplane) mapMemory() (map[string]int64, error) {
	dir, err := datapath.PinnedMapsDir(d.fs.Path())
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, e := range ents {
		b, err := exec.Command("bpftool", "-j", "map", "show", "pinned", filepath.Join(dir, e.Name())).Output()
		if err != nil {
			return nil, fmt.Errorf("bpftool map show pinned %s: %w", e.Name(), err)
		}
		var m struct {
			BytesMemlock *int64 `json:"bytes_memlock"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("bpftool map show pinned %s: %w", e.Name(), err)
		}
		if m.BytesMemlock == nil {
			return nil, fmt.Errorf("bpftool map show pinned %s: no bytes_memlock", e.Name())
		}
		out[e.Name()] = *m.BytesMemlock
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no maps pinned in %s", dir)
	}
	return out, nil
}

// stopAgent stops the dataplane's agent once its measurements are done.
// kube-proxy's sync in progress (an iptables-restore of a size it could
// not program within the timeout) is killed with it: left running it would
// take a CPU from the dataplanes measured next.
func (d *dataplane) stopAgent() {
	switch d.name {
	case "iptables", "nftables":
		stopKubeProxy(d.agent)
	default:
		d.agent.Stop(10 * time.Second)
	}
}
