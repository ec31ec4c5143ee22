package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// TestNewAddressServesNodePortsAtOnce: the agent follows its network
// namespace's interface addresses through netlink: an address added there
// serves NodePorts within a second, with no API change (and none of the
// resync's hour), and leaves with the address. The agent runs in a
// namespace of the lab (nsenter --net keeps the mount namespace, so the
// bpffs and the cgroup stay visible), whose lo gets the address; the
// connects come from the client namespace, which has no default route.
func TestNewAddressServesNodePortsAtOnce(t *testing.T) {
	e := newEnv(t, threePods...)
	e.writeManifest("svc.yaml", svcSpec{name: "np", clusterIPs: []string{vip}, typ: "NodePort", nodePort: 30080}.yaml(allReady("node-a")...))
	node, err := e.lab.AddClient("node")
	if err != nil {
		t.Fatal(err)
	}
	e.startAgentIn(node.NetNS)
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.13:8080")
	const addr = "198.51.100.77"
	if out := e.inspect(); strings.Contains(out, addr) {
		t.Fatalf("%s in the maps before it was added:\n%s", addr, out)
	}

	ipNode := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", node.NetNS}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ipNode("addr", "add", addr+"/32", "dev", "lo")
	took := waitInspectFor(e, func(out string) bool { return strings.Contains(out, addr+":30080/TCP") })
	t.Logf("the NodePort on %s was in the maps %s after the address", addr, took)
	// Event-driven (netlink), so well under the 5 s allowed here for a
	// loaded machine: the full resync that would otherwise notice is hourly.
	if took > 5*time.Second {
		t.Errorf("the NodePort on a new address took %s, want under 5s", took)
	}
	if res := tcpN(t, e, e.client(), addr+":30080", 3); res.OK != 3 {
		t.Errorf("connects to %s:30080: replies %v errors %v, want 3 answers from the pods", addr, res.Replies, res.Errors)
	}

	ipNode("addr", "del", addr+"/32", "dev", "lo")
	if took := waitInspectFor(e, func(out string) bool { return !strings.Contains(out, addr+":30080/TCP") }); took > 5*time.Second {
		t.Errorf("the NodePort of a removed address stayed %s, want under 5s", took)
	}
}

// waitInspectFor polls `socklb inspect` until ok holds and returns how long
// that took, failing the test after 10 s.
func waitInspectFor(e *env, ok func(string) bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	for {
		out := e.inspect()
		if ok(out) {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			e.t.Fatalf("inspect never changed as expected within 10s; last output:\n%s\nagent log:\n%s", out, e.agentLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startAgentIn runs the agent in the named network namespace, with the
// usual arguments.
func (e *env) startAgentIn(netns string, extra ...string) {
	e.t.Helper()
	args := append([]string{"--net=/run/netns/" + netns, socklbBin, "agent",
		"--manifests", e.manifests,
		"--node-name", "node-a",
		"--cgroup-path", e.cg.Path(),
		"--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "127.0.0.1:0",
	}, extra...)
	// nsenter without --fork execs the agent: the process is the agent's,
	// and its signals reach it.
	p, err := testkit.StartProc("socklb agent", filepath.Join(e.t.TempDir(), "socklb-agent.log"), "nsenter", args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.agent = &testkit.AgentProcess{Proc: p, Bin: socklbBin}
	e.mu.Unlock()
}
