package integration

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentRestartKeepsServing: the links and maps are pinned, so with the
// agent killed hard the ClusterIP keeps working; a new agent adopts the
// pins and applies what changed while it was down.
func TestAgentRestartKeepsServing(t *testing.T) {
	e := startEcho(t)
	e.stopAgent(syscall.SIGKILL)

	res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", 30)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 30 {
		t.Fatalf("with the agent down, %d/30 connects answered: %v", res.OK, res.Errors)
	}

	// Changed while the agent was down: echo shrinks, empty disappears.
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.12")...))
	if err := exec.Command("rm", e.manifests+"/empty.yaml").Run(); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := e.inspect()
		if !strings.Contains(out, "10.96.0.20") && !strings.Contains(out, "10.244.1.11:8080") && strings.Contains(out, "10.244.1.12:8080") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted agent did not reconcile; inspect:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(e.agentLog(), "adopted_frontends=4") {
		t.Errorf("agent log does not report adopting the 4 pinned frontends:\n%s", e.agentLog())
	}
	res, err = e.client().TCP(e.ctx(), e.cg, vip+":80", 10)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replies["pod2"] != 10 {
		t.Fatalf("after reconcile: %v %v, want all 10 on pod2", res.Replies, res.Errors)
	}
}

// TestCleanupDetaches: SIGTERM leaves the hooks attached and serving;
// `socklb cleanup` then leaves the cgroup with no program and the
// ClusterIP untranslated.
func TestCleanupDetaches(t *testing.T) {
	if _, err := exec.LookPath("bpftool"); err != nil {
		t.Fatal("needs bpftool to list the cgroup's programs: apt-get install bpftool")
	}
	e := startEcho(t)
	e.stopAgent(syscall.SIGTERM)
	out, err := exec.Command("bpftool", "cgroup", "show", e.cg.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("bpftool cgroup show after SIGTERM: %v %s", err, out)
	}
	for _, h := range []string{"connect4", "sendmsg4", "recvmsg4", "getpeername4", "connect6", "sendmsg6", "recvmsg6", "getpeername6"} {
		if !strings.Contains(string(out), h) {
			t.Errorf("after SIGTERM the %s hook should stay attached; bpftool cgroup show:\n%s", h, out)
		}
	}
	// Attached only while a Service has loadBalancerSourceRanges; none has.
	if strings.Contains(string(out), "egress") {
		t.Errorf("the egress hook is attached with no Service needing it; bpftool cgroup show:\n%s", out)
	}
	if res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", 10); err != nil || res.OK != 10 {
		t.Fatalf("after SIGTERM the ClusterIP should still be served: %+v %v", res, err)
	}
	if out, err := exec.Command(socklbBin, "cleanup", "--bpffs-path", e.fs.Path()).CombinedOutput(); err != nil {
		t.Fatalf("cleanup: %v %s", err, out)
	}
	// Unpinning drops each link's last reference from a kernel workqueue
	// (bpf_link_put defers the free): the detach lands a moment later.
	if !eventually(5*time.Second, func() bool {
		out, err = exec.Command("bpftool", "cgroup", "show", e.cg.Path()).CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == ""
	}) {
		t.Fatalf("programs still attached 5 s after cleanup: %v\n%s", err, out)
	}
	res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors["ENETUNREACH"] != 1 {
		t.Fatalf("after cleanup the ClusterIP still answered: %+v", res)
	}
}

// TestBpftoolDumpsNamedFields: every map is BTF-typed, so the standard tool
// prints its keys and values with field names.
func TestBpftoolDumpsNamedFields(t *testing.T) {
	e := startEcho(t)
	for m, fields := range map[string][]string{
		"services": {`"svc_id"`, `"count"`, `"generation"`},
		"slots":    {`"slot"`},
		"backends": {`"addr"`, `"port"`},
		"stats":    {`"connects"`},
	} {
		out, err := exec.Command("bpftool", "-j", "map", "dump", "pinned", e.mapPin(m)).CombinedOutput()
		if err != nil {
			t.Fatalf("bpftool map dump %s: %v\n%s", m, err, out)
		}
		for _, f := range fields {
			if !strings.Contains(string(out), f) {
				t.Errorf("bpftool dump of %s lacks field %s:\n%.600s", m, f, out)
			}
		}
	}
}
