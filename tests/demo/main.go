// Command demo shows socklb at work on one machine, safely: it builds a small
// lab (a client network namespace and three "pods", each its own namespace,
// joined by veth pairs, no default route anywhere) and a fresh child cgroup,
// starts the socklb agent on the manifests in examples/ with its programs
// attached to that cgroup only, and talks to the Services from the client
// namespace. Everything is torn down at the end, on error, and on Ctrl-C.
//
//	sudo go run ./tests/demo --socklb bin/socklb --manifests examples
//
// It expects examples/demo.yaml: Service default/echo, ClusterIP 10.96.0.10,
// TCP 80 -> 8080 and UDP 53 -> 5353, endpoints echo-1/2/3 at 10.244.1.11-13;
// Service default/empty, 10.96.0.20:80, no endpoints.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

const (
	echoVIP  = "10.96.0.10"
	emptyVIP = "10.96.0.20"
	noVIP    = "10.96.0.99"
)

var pods = []lab.PodSpec{
	{Name: "echo-1", IP: "10.244.1.11"},
	{Name: "echo-2", IP: "10.244.1.12"},
	{Name: "echo-3", IP: "10.244.1.13"},
}

func main() {
	socklb := flag.String("socklb", "bin/socklb", "path to the socklb binary")
	manifests := flag.String("manifests", "examples", "directory of Service/EndpointSlice manifests for the agent")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{socklb: *socklb, manifests: *manifests}
	err := d.run(ctx)
	switch {
	case ctx.Err() != nil:
		d.say("\ninterrupted; everything has been cleaned up.")
		os.Exit(130)
	case err != nil:
		d.say("\n✗ demo failed: %v", err)
		os.Exit(1)
	case d.failed > 0:
		d.say("\n✗ %d check(s) failed (see above). Everything has been cleaned up.", d.failed)
		os.Exit(1)
	}
	d.say("\n✓ all checks passed. Everything has been cleaned up.")
}

type demo struct {
	socklb, manifests string
	bpffs             string

	mu     sync.Mutex // one writer at a time on stdout
	failed int
}

// say prints one message; agent log lines never split it.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

func (d *demo) step(format string, args ...any) {
	d.say("\n▶ "+format, args...)
}

func (d *demo) check(ok bool, format string, args ...any) {
	mark := "✓"
	if !ok {
		mark = "✗"
		d.mu.Lock()
		d.failed++
		d.mu.Unlock()
	}
	d.say("  %s "+format, append([]any{mark}, args...)...)
}

func (d *demo) run(ctx context.Context) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("run me as root: the demo creates network namespaces, a cgroup and BPF pins")
	}
	if d.socklb, err = filepath.Abs(d.socklb); err != nil {
		return err
	}
	if _, err := os.Stat(d.socklb); err != nil {
		return fmt.Errorf("socklb binary: %w (build it first, e.g. `make build`)", err)
	}
	if d.manifests, err = filepath.Abs(d.manifests); err != nil {
		return err
	}
	if _, err := os.Stat(d.manifests); err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	// A private bpffs instance: the demo never pins into the host's
	// /sys/fs/bpf, and unmounting it at the end removes whatever is left.
	fsys, err := testkit.NewBPFFS()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fsys.Close()) }()
	d.bpffs = fsys.Path()

	d.say("socklb demo: ClusterIP Services answered by eBPF at the socket layer.")
	d.say("Nothing here touches the host's network or cgroups: the client and the pods live in")
	d.say("their own network namespaces with no default route, and socklb attaches only to a")
	d.say("fresh cgroup that holds nothing but the demo's client processes.")

	// Teardown runs in reverse: agent + pins, then the lab, then the cgroup.
	defer func() {
		if rerr := lab.RemoveLabclient(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()

	d.step("setting up")
	if _, err := lab.BuildLabclient(); err != nil {
		return err
	}
	cg, err := lab.NewCgroup()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cg.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			d.say("  removed cgroup %s", cg.Path())
		}
	}()
	d.say("  cgroup     %s", cg.Path())

	l, err := lab.New(lab.Config{Pods: pods})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			d.say("  removed namespaces %s-*", l.Prefix())
		}
	}()
	if err := l.StartAllServers(); err != nil {
		return err
	}
	cli := l.Client("")
	d.say("  client     netns %-18s %s", cli.NetNS, cli.IP)
	for _, p := range l.Pods() {
		d.say("  pod        netns %-18s %-12s %s  (tcp :%d, udp :%d answer %q)", p.NetNS, p.IP, p.Name, lab.DefaultTCPPort, lab.DefaultUDPPort, p.Name)
	}

	// Without socklb, a ClusterIP has no route in the client namespace.
	d.step("before socklb: connect to %s:80 from the client namespace", echoVIP)
	r, err := cli.TCP(ctx, cg, echoVIP+":80", 1)
	if err != nil {
		return err
	}
	d.check(r.Errors["ENETUNREACH"] == 1, "%s:80 -> %s (no route: the packet never leaves the namespace)", echoVIP, outcome(r))

	// The agent.
	d.step("starting the agent")
	agent, err := d.startAgent(cg)
	if err != nil {
		return err
	}
	defer func() {
		d.step("stopping")
		if serr := agent.stop(10 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
		if cerr := d.cleanupPins(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := d.waitReady(ctx, agent); err != nil {
		return err
	}

	// TCP, spread over the three pods.
	const n = 30
	d.step("%d TCP connects to %s:80 (Service default/echo, port 80 -> 8080)", n, echoVIP)
	l.ResetCounts()
	r, err = cli.TCP(ctx, cg, echoVIP+":80", n)
	if err != nil {
		return err
	}
	for i := 0; i < len(r.Sequence); i += 10 {
		j := min(i+10, len(r.Sequence))
		d.say("  %2d-%2d  %s", i+1, j, strings.Join(r.Sequence[i:j], " "))
	}
	d.say("")
	d.tally(r.Replies, n)
	server := l.Counts("tcp")
	d.say("  the pods' own counters: %s", fmtCounts(server))
	spread := true
	for _, p := range pods {
		spread = spread && r.Replies[p.Name] > 0 && server[p.Name] > 0
	}
	d.check(r.OK == n, "%d/%d connects answered%s", r.OK, n, errSuffix(r))
	d.check(spread, "every pod got traffic (random choice per connect, like kube-proxy)")
	d.check(r.Peer == echoVIP+":80", "getpeername() says %s: the application sees the ClusterIP", orNone(r.Peer))

	// UDP, unconnected: sendmsg and recvmsg hooks.
	const q = 10
	d.step("%d UDP queries to %s:53 (port 53 -> 5353) on one unconnected socket", q, echoVIP)
	l.ResetCounts()
	r, err = cli.UDP(ctx, cg, echoVIP+":53", q)
	if err != nil {
		return err
	}
	d.say("  answers  %s", strings.Join(r.Sequence, " "))
	d.tally(r.Replies, q)
	d.check(r.OK == q, "%d/%d queries answered%s", r.OK, q, errSuffix(r))
	d.check(len(r.Sources) == 1 && r.Sources[0] == echoVIP+":53",
		"replies come from %s: the pod's address is rewritten back to the ClusterIP", orNone(strings.Join(r.Sources, ", ")))

	d.step("a Service with no endpoints: connect to %s:80 (default/empty)", emptyVIP)
	r, err = cli.TCP(ctx, cg, emptyVIP+":80", 1)
	if err != nil {
		return err
	}
	d.check(r.Errors["ECONNREFUSED"] == 1, "%s:80 -> %s (as kube-proxy's REJECT)", emptyVIP, outcome(r))

	d.step("an address that is no Service: connect to %s:80", noVIP)
	r, err = cli.TCP(ctx, cg, noVIP+":80", 1)
	if err != nil {
		return err
	}
	d.check(r.Errors["ENETUNREACH"] == 1, "%s:80 -> %s (untouched by socklb; no route in the namespace)", noVIP, outcome(r))

	d.step("socklb inspect --bpffs-path %s", d.bpffs)
	out, ierr := d.socklbCmd(ctx, "inspect", "--bpffs-path", d.bpffs)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		d.say("  %s", line)
	}
	if ierr != nil {
		return fmt.Errorf("inspect: %w", ierr)
	}
	return nil
}

// outcome is what a single attempt gave: the pod, or the error name.
func outcome(r *lab.Result) string {
	if len(r.Sequence) > 0 {
		return r.Sequence[0]
	}
	for e := range r.Errors {
		return e
	}
	for p := range r.Replies {
		return p
	}
	return "nothing"
}

func orNone(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}

func errSuffix(r *lab.Result) string {
	if len(r.Errors) == 0 {
		return ""
	}
	return " (errors: " + fmtCounts(toInt64(r.Errors)) + ")"
}

func toInt64(m map[string]int) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func (d *demo) tally(replies map[string]int, total int) {
	for _, p := range pods {
		c := replies[p.Name]
		d.say("  %-7s %-30s %2d  (%2.0f%%)", p.Name, strings.Repeat("█", c), c, 100*float64(c)/float64(total))
	}
}

// socklbCmd runs a socklb subcommand and returns its combined output.
func (d *demo) socklbCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, d.socklb, args...).CombinedOutput()
	return string(out), err
}

type agentProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid after done
}

func (d *demo) startAgent(cg *lab.Cgroup) (*agentProc, error) {
	args := []string{"agent",
		"--manifests", d.manifests,
		"--node-name", "demo-node",
		"--cgroup-path", cg.Path(),
		"--bpffs-path", d.bpffs,
		"--healthz-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "127.0.0.1:0",
	}
	d.say("  %s %s", filepath.Base(d.socklb), strings.Join(args, " "))
	cmd := exec.Command(d.socklb, args...)
	w := &prefixWriter{d: d, prefix: "  agent │ "}
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group, so Ctrl-C reaches only the demo, which then
	// stops the agent with SIGTERM in order; and SIGTERM if the demo dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	a := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		w.flush()
		close(a.done)
	}()
	return a, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (a *agentProc) stop(grace time.Duration) error {
	select {
	case <-a.done:
		return nil // already gone; its exit was reported
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		var ee *exec.ExitError
		if a.err != nil && !errors.As(a.err, &ee) {
			return a.err
		}
		return nil
	case <-time.After(grace):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("agent ignored SIGTERM for %v; killed", grace)
	}
}

// waitReady polls `socklb inspect` until it shows the echo ClusterIP.
func (d *demo) waitReady(ctx context.Context, a *agentProc) error {
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for {
		select {
		case <-a.done:
			return fmt.Errorf("agent exited before it was ready: %v", a.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		out, err := d.socklbCmd(ctx, "inspect", "--bpffs-path", d.bpffs)
		if err == nil && strings.Contains(out, echoVIP) {
			d.say("  agent ready: `socklb inspect` lists %s", echoVIP)
			return nil
		}
		last = strings.TrimSpace(out)
		if time.Now().After(deadline) {
			return fmt.Errorf("agent not ready after 10s: `socklb inspect` never listed %s (last output: %q, err %v)", echoVIP, last, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cleanupPins runs `socklb cleanup` and makes sure the per-run bpffs
// directory is gone.
func (d *demo) cleanupPins() error {
	out, err := d.socklbCmd(context.Background(), "cleanup", "--bpffs-path", d.bpffs)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" {
			d.say("  cleanup │ %s", line)
		}
	}
	if err != nil {
		err = fmt.Errorf("socklb cleanup: %w", err)
	}
	if err == nil {
		d.say("  agent stopped, pins removed (%s)", d.bpffs)
	}
	return err
}

// prefixWriter prints each complete line with a prefix, under the demo's
// output lock.
type prefixWriter struct {
	d      *demo
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.d.say("%s%s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.d.say("%s%s", w.prefix, w.buf)
		w.buf = nil
	}
}

var _ io.Writer = (*prefixWriter)(nil)
