package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// secondAgent starts another agent on e's pin directory and cgroup, as a
// rolling update's surge pod or a hand-started `socklb agent` would.
func (e *env) secondAgent(extra ...string) *testkit.AgentProcess {
	e.t.Helper()
	args := append([]string{"--manifests", e.manifests, "--node-name", "node-a",
		"--cgroup-path", e.cg.Path(), "--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0"}, extra...)
	// Stopped before the env's cleanup (registered earlier, so run later) unpins.
	return testkit.RunAgent(e.t, socklbBin, args...)
}

// TestSecondAgentWaitsForTheLock: while one agent serves from a pin
// directory, a second one waits for it (saying so, and naming the holder)
// instead of adopting the maps and sweeping what the first one writes; it
// gives up after --lock-timeout, and takes over once the first one exits.
func TestSecondAgentWaitsForTheLock(t *testing.T) {
	e := startEcho(t)
	first := e.current().Pid()

	second := e.secondAgent("--lock-timeout", "1s")
	select {
	case <-second.Exited():
		if second.ExitErr() == nil {
			t.Fatalf("second agent started beside the first:\n%s", second.Log())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("second agent neither served nor gave up within 10 s:\n%s", second.Log())
	}
	out := second.Log()
	for _, want := range []string{"waiting for another socklb agent", "another socklb agent (pid " + itoa(first), "--lock-timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("second agent's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "datapath ready") {
		t.Errorf("second agent opened the datapath while the first held it:\n%s", out)
	}

	// A patient second agent takes over when the first one exits.
	second = e.secondAgent("--lock-timeout", "30s")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(second.Log(), "waiting for another socklb agent") {
		if time.Now().After(deadline) {
			t.Fatalf("second agent did not say it waits:\n%s", second.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stopAgent(syscall.SIGTERM)
	for !strings.Contains(second.Log(), "datapath ready") {
		select {
		case <-second.Exited():
			t.Fatalf("second agent exited (%v) instead of taking over:\n%s", second.ExitErr(), second.Log())
		default:
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("second agent did not take over after the first exited:\n%s", second.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.OK != 10 {
		t.Fatalf("after the takeover: replies %v errors %v", res.Replies, res.Errors)
	}
}

// TestCleanupRefusesWhileAgentRuns: `socklb cleanup` would detach a
// running agent's hooks while its /healthz stays 200: it refuses, naming
// the agent; --force removes the pins, and the agent notices at its next
// check and puts maps and links back.
func TestCleanupRefusesWhileAgentRuns(t *testing.T) {
	e := newEnv(t, threePods...)
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
	e.startAgent("--pin-check-interval", "200ms")
	e.waitInspect(10*time.Second, "10.244.1.13:8080")

	out, err := exec.Command(socklbBin, "cleanup", "--bpffs-path", e.fs.Path()).CombinedOutput()
	if err == nil {
		t.Fatalf("cleanup succeeded while the agent runs: %s", out)
	}
	if !strings.Contains(string(out), "pid "+itoa(e.current().Pid())) || !strings.Contains(string(out), "--force") {
		t.Errorf("cleanup's refusal does not name the agent and --force: %s", out)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 5); res.OK != 5 {
		t.Fatalf("a refused cleanup broke the datapath: %v %v", res.Replies, res.Errors)
	}

	out, err = exec.Command(socklbBin, "cleanup", "--force", "--bpffs-path", e.fs.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("cleanup --force: %v %s", err, out)
	}
	if !strings.Contains(string(out), "removed socklb's links and maps") {
		t.Errorf("cleanup --force does not say it removed the links and maps: %s", out)
	}
	waitServing(t, e, "after cleanup --force")
	// The links may come back before the maps: cleanup unpins the maps
	// after the links, and a pin check can run in between.
	if !eventually(5*time.Second, func() bool { _, err := os.Stat(e.mapPin("services")); return err == nil }) {
		t.Errorf("services map not pinned again within 5 s")
	}
	// Serving again proves nothing if --force removed nothing: the agent
	// must have found its pins gone and put them back.
	deadline := time.Now().Add(5 * time.Second)
	for log := e.agentLog(); !strings.Contains(log, "re-created them"); log = e.agentLog() {
		if time.Now().After(deadline) {
			t.Fatalf("the agent logged no repair within 5 s of cleanup --force:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Counted right after the log line.
	repaired := func(m string) bool {
		return !strings.Contains(m, "socklb_pins_repaired_total 0\n") && strings.Contains(m, "socklb_pins_repaired_total ")
	}
	if !eventually(5*time.Second, func() bool { return repaired(e.scrape()) }) {
		m := e.scrape()
		t.Errorf("socklb_pins_repaired_total after cleanup --force:\n%s", testkit.GrepLines(m, "socklb_pins_repaired"))
	}
}

// TestUnpinnedLinkDetected: removing one link pin by hand detaches that
// hook at once; the agent notices within its check interval, attaches and
// pins it again, logs it and counts it.
func TestUnpinnedLinkDetected(t *testing.T) {
	e := newEnv(t, threePods...)
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
	e.startAgent("--pin-check-interval", "200ms")
	e.waitInspect(10*time.Second, "10.244.1.13:8080")
	if err := os.Remove(filepath.Join(e.fs.Path(), "links", "connect4")); err != nil {
		t.Fatal(err)
	}
	waitServing(t, e, "after connect4's pin was removed")
	// The agent logs a repair after making it: connects may work first.
	deadline := time.Now().Add(5 * time.Second)
	for log := e.agentLog(); !strings.Contains(log, "re-created them") || !strings.Contains(log, "connect4"); log = e.agentLog() {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not log the repair naming the link within 5 s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !eventually(5*time.Second, func() bool { return strings.Contains(e.scrape(), "socklb_pins_repaired_total 1\n") }) {
		m := e.scrape()
		t.Errorf("socklb_pins_repaired_total:\n%s", testkit.GrepLines(m, "socklb_pins_repaired"))
	}
}

// waitServing waits until the ClusterIP answers again, within 5 s.
func waitServing(t *testing.T, e *env, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res := tcpN(t, e, e.client(), vip+":80", 3)
		if res.OK == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the ClusterIP still fails 5 s later (%v %v): the agent did not repair its pins\n%s", what, res.Replies, res.Errors, e.agentLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
