package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// secondAgent starts another agent on e's pin directory and cgroup, as a
// rolling update's surge pod or a hand-started `socklb agent` would.
func (e *env) secondAgent(extra ...string) (cmd *exec.Cmd, logs *lockedBuffer, exited chan error) {
	e.t.Helper()
	args := append([]string{"agent", "--manifests", e.manifests, "--node-name", "node-a",
		"--cgroup-path", e.cg.Path(), "--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0"}, extra...)
	cmd = exec.Command(socklbBin, args...)
	logs = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Before the env's cleanup (registered earlier, so run later) unpins.
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return cmd, logs, exited
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSecondAgentWaitsForTheLock: while one agent serves from a pin
// directory, a second one waits for it (saying so, and naming the holder)
// instead of adopting the maps and sweeping what the first one writes; it
// gives up after --lock-timeout, and takes over once the first one exits.
func TestSecondAgentWaitsForTheLock(t *testing.T) {
	e := startEcho(t)
	first := e.agent.Process.Pid

	_, logs, exited := e.secondAgent("--lock-timeout", "1s")
	select {
	case err := <-exited:
		if err == nil {
			t.Fatalf("second agent started beside the first:\n%s", logs)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("second agent neither served nor gave up within 10 s:\n%s", logs)
	}
	out := logs.String()
	for _, want := range []string{"waiting for another socklb agent", "another socklb agent (pid " + itoa(first), "--lock-timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("second agent's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "datapath ready") {
		t.Errorf("second agent opened the datapath while the first held it:\n%s", out)
	}

	// A patient second agent takes over when the first one exits.
	_, logs, exited = e.secondAgent("--lock-timeout", "30s")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "waiting for another socklb agent") {
		if time.Now().After(deadline) {
			t.Fatalf("second agent did not say it waits:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stopAgent(syscall.SIGTERM)
	for !strings.Contains(logs.String(), "datapath ready") {
		select {
		case err := <-exited:
			t.Fatalf("second agent exited (%v) instead of taking over:\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("second agent did not take over after the first exited:\n%s", logs)
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
	if !strings.Contains(string(out), "pid "+itoa(e.agent.Process.Pid)) || !strings.Contains(string(out), "--force") {
		t.Errorf("cleanup's refusal does not name the agent and --force: %s", out)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 5); res.OK != 5 {
		t.Fatalf("a refused cleanup broke the datapath: %v %v", res.Replies, res.Errors)
	}

	out, err = exec.Command(socklbBin, "cleanup", "--force", "--bpffs-path", e.fs.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("cleanup --force: %v %s", err, out)
	}
	waitServing(t, e, "after cleanup --force")
	if _, err := os.Stat(e.mapPin("services")); err != nil {
		t.Errorf("services map not pinned again: %v", err)
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
	if !strings.Contains(e.agentLog(), "re-created them") || !strings.Contains(e.agentLog(), "connect4") {
		t.Errorf("the agent did not log the repair naming the link:\n%s", e.agentLog())
	}
	if m := e.scrape(); !strings.Contains(m, "socklb_pins_repaired_total 1\n") {
		t.Errorf("socklb_pins_repaired_total:\n%s", grepLines(m, "socklb_pins_repaired"))
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
