package integration

import (
	"context"
	"runtime"

	"fmt"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

// xenv is a lab of several machines for the per-packet path: two nodes on
// an underlay, two pods each, and an outside machine with no socklb hook.
// socklb's agent runs inside node 1's network namespace (nsenter keeps the
// mount namespace, so bpffs and cgroup2 stay visible), serves node 1's eth0
// with --packet-lb, and attaches its socket hooks to a fresh child cgroup
// holding only the clients a test runs there. Node 2 runs no agent: what
// reaches it untranslated is what a node without socklb would see.
type xenv struct {
	t         *testing.T
	m         *lab.MultiNode
	cg        *lab.Cgroup
	fs        *testkit.BPFFS
	manifests string
	logPath   string
	agent     *testkit.Proc
}

// Addresses of the multi-node lab (internal/lab/doc.go).
var (
	n1IP, n1IP6 = "10.250.0.11", "fd00:250::11"
	n2IP, n2IP6 = "10.250.0.12", "fd00:250::12"
	outsideIP   = "10.250.0.100"
)

// twoNodes is the cluster's Node objects: n1 (where the agent runs) and n2.
func twoNodes() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: zone-a}}
status:
  addresses:
  - {type: InternalIP, address: %s}
  - {type: InternalIP, address: %s}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {topology.kubernetes.io/zone: zone-a}}
status:
  addresses:
  - {type: InternalIP, address: %s}
  - {type: InternalIP, address: %s}
`, n1IP, n1IP6, n2IP, n2IP6)
}

func newXEnv(t *testing.T, files map[string]string, agentArgs ...string) *xenv {
	t.Helper()
	testkit.RequireRoot(t, "creates network namespaces, a cgroup, BPF pins and tcx links inside them")
	e := &xenv{t: t, manifests: t.TempDir()}
	var err error
	if e.cg, err = lab.NewCgroup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { check(t, e.cg.Close()) })
	if e.fs, err = testkit.NewBPFFS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { check(t, e.fs.Close()) })
	if e.m, err = lab.NewMultiNode(lab.MultiNodeConfig{Nodes: 2, PodsPerNode: 2, IPv6: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { check(t, e.m.Close()) })
	if err := e.m.StartAllServers(); err != nil {
		t.Fatal(err)
	}
	files["nodes.yaml"] = twoNodes()
	for name, body := range files {
		e.write(name, body)
	}
	// Registered last, so it runs first: stop the agent, then unpin
	// (which detaches the hooks and the device links).
	t.Cleanup(func() {
		e.stop(syscall.SIGTERM)
		check(t, testkit.CleanupPins(socklbBin, e.fs.Path()))
		if t.Failed() {
			t.Logf("agent log:\n%s", e.log())
		}
	})
	e.start(agentArgs...)
	return e
}

func (e *xenv) write(name, body string) {
	e.t.Helper()
	writeManifest(e.t, e.manifests, name, body)
}

// start runs the agent in node 1's network namespace.
func (e *xenv) start(extra ...string) {
	e.t.Helper()
	args := append([]string{"agent", "--manifests", e.manifests, "--node-name", "n1",
		"--cgroup-path", e.cg.Path(), "--bpffs-path", e.fs.Path(),
		"--packet-lb", "--devices", "eth0",
		"--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
		"--pin-check-interval", "200ms"}, extra...)
	if e.logPath == "" {
		e.logPath = filepath.Join(e.t.TempDir(), "socklb-agent.log")
	}
	cmd := e.m.Node(1).Command(context.Background(), socklbBin, args...)
	p, err := testkit.StartProcCmd("socklb agent on n1", e.logPath, cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	e.agent = p
}

func (e *xenv) stop(sig syscall.Signal) {
	if e.agent == nil {
		return
	}
	_ = e.agent.Signal(sig)
	select {
	case <-e.agent.Exited():
	case <-time.After(10 * time.Second):
		e.agent.Stop(time.Second)
	}
	e.agent = nil
}

func (e *xenv) log() string {
	b, _ := os.ReadFile(e.logPath)
	return string(b)
}

// waitInspect waits until `socklb inspect` shows every want.
func (e *xenv) waitInspect(want ...string) string {
	e.t.Helper()
	var out string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path()).CombinedOutput()
		out = string(b)
		missing := false
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = true
			}
		}
		if !missing && strings.Contains(e.log(), "serving traffic from other machines") {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("inspect never showed %q (and the agent never said it serves its devices):\n%s\nagent log:\n%s", want, out, e.log())
	return out
}

func (e *xenv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// outside runs labclient on the outside machine: no cgroup of ours, no
// socklb hook.
func (e *xenv) outside(mode, addr string, n int, extra ...string) *lab.Result {
	e.t.Helper()
	args := append([]string{mode, "--addr", addr, "--count", fmt.Sprint(n)}, extra...)
	res, err := e.m.Outside.RunResult(e.ctx(), nil, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// peers is which source addresses pod saw over proto since the last reset.
func (e *xenv) peers(pod, proto string) []netip.Addr {
	var out []netip.Addr
	for a := range e.m.Peers(proto)[pod] {
		out = append(out, a)
	}
	return out
}

// deviceProgs names the programs attached (tcx, both directions) to node
// i's eth0, asked from inside its namespace.
func (e *xenv) deviceProgs(i int) ([]string, error) {
	type answer struct {
		names []string
		err   error
	}
	ch := make(chan answer, 1)
	go func() {
		var a answer
		defer func() { ch <- a }()
		runtime.LockOSThread() // never unlocked: the thread dies in the node's namespace
		ns, err := netns.GetFromPath(e.m.Node(i).NetNSPath())
		if err != nil {
			a.err = err
			return
		}
		defer ns.Close()
		if a.err = netns.Set(ns); a.err != nil {
			return
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: e.m.Node(i).Device.Index, Attach: at})
			if err != nil {
				a.err = fmt.Errorf("querying %s on n%d's eth0: %w", at, i, err)
				return
			}
			for _, p := range res.Programs {
				prog, err := ebpf.NewProgramFromID(p.ID)
				if err != nil {
					a.err = err
					return
				}
				info, err := prog.Info()
				prog.Close()
				if err != nil {
					a.err = err
					return
				}
				a.names = append(a.names, info.Name)
			}
		}
	}()
	a := <-ch
	return a.names, a.err
}
