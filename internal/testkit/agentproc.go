package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// AgentProcess is one `socklb agent` process, its output in a log file.
type AgentProcess struct {
	*Proc
	Bin string
}

// StartAgent starts `bin agent args...`, its output to logPath. It returns
// once the process runs, not once it serves: see WaitReady.
func StartAgent(bin, logPath string, args ...string) (*AgentProcess, error) {
	p, err := StartProc("socklb agent", logPath, bin, append([]string{"agent"}, args...)...)
	if err != nil {
		return nil, err
	}
	return &AgentProcess{Proc: p, Bin: bin}, nil
}

// RunAgent is StartAgent for one test: the log goes to the test's temporary
// directory, and the agent is stopped at the end of the test (before the
// cleanups registered earlier), its log printed when the test failed.
func RunAgent(t testing.TB, bin string, args ...string) *AgentProcess {
	t.Helper()
	a, err := StartAgent(bin, filepath.Join(t.TempDir(), "socklb-agent.log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.StopWith(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", a.LogPath, a.Log())
		}
	})
	return a
}

// Log is everything the agent wrote so far.
func (a *AgentProcess) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// StopWith sends sig (SIGTERM: a graceful stop; SIGKILL: a crash) and
// waits for the exit, killing the agent after 10 s. Safe to call twice.
func (a *AgentProcess) StopWith(sig syscall.Signal) {
	if a == nil || !a.Alive() {
		return
	}
	_ = a.Signal(sig)
	select {
	case <-a.Exited():
	case <-time.After(10 * time.Second):
		_ = a.Signal(syscall.SIGKILL)
		<-a.Exited()
	}
}

// LoggedAddr waits for the agent's `"serving <what>" addr="..."` line and
// returns the address: with --*-bind-address 127.0.0.1:0 the kernel picks
// the port, and the log is the only place that says which.
func (a *AgentProcess) LoggedAddr(what string, timeout time.Duration) (string, error) {
	re := regexp.MustCompile(`"serving ` + regexp.QuoteMeta(what) + `" addr="([^"]+)"`)
	for deadline := time.Now().Add(timeout); ; {
		if m := re.FindStringSubmatch(a.Log()); m != nil {
			return m[1], nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the agent did not log its %s address within %s:\n%s", what, timeout, a.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitReady waits until the agent answers on healthz and has finished its
// first sync (socklb_sync_proxy_rules_last_timestamp_seconds is set), or
// fails with the end of its log.
func (a *AgentProcess) WaitReady(healthz, metrics string, timeout time.Duration) error {
	if err := a.WaitFor("/healthz", timeout, func() error {
		_, _, err := Get(healthz, "/healthz")
		return err
	}); err != nil {
		return err
	}
	return a.WaitFor("the first sync", timeout, func() error {
		if v, _ := Metric(metrics, "socklb_sync_proxy_rules_last_timestamp_seconds"); v == 0 {
			return fmt.Errorf("no sync yet")
		}
		return nil
	})
}

// CleanupPins runs `socklb cleanup` on a pin directory: it unpins the
// links (detaching the programs) and the maps an agent left behind, as a
// node's uninstall does.
func CleanupPins(bin, bpffsPath string) error {
	out, err := exec.Command(bin, "cleanup", "--bpffs-path", bpffsPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("socklb cleanup --bpffs-path %s: %v: %s", bpffsPath, err, out)
	}
	return nil
}
