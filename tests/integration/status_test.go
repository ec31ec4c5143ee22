package integration

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/pkg/agentstatus"
)

// loggedAddr is the address the agent logged for msg ("serving health").
func (e *env) loggedAddr(msg string) string {
	e.t.Helper()
	re := regexp.MustCompile(`"` + msg + `" addr="([^"]+)"`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if m := re.FindStringSubmatch(e.agentLog()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the agent did not log %q within 10 s:\n%s", msg, e.agentLog())
		}
	}
}

func (e *env) status(healthz, metrics string) (agentstatus.Status, string, error) {
	e.t.Helper()
	cmd := exec.Command(socklbBin, "status", "-o", "json", "--bpffs-path", e.fs.Path(), "--healthz-address", healthz, "--metrics-address", metrics)
	out, err := cmd.Output()
	var s agentstatus.Status
	if jerr := json.Unmarshal(out, &s); jerr != nil {
		e.t.Fatalf("socklb status -o json printed %q: %v (exit: %v)", out, jerr, err)
	}
	text, _ := exec.Command(socklbBin, "status", "--bpffs-path", e.fs.Path(), "--healthz-address", healthz, "--metrics-address", metrics).CombinedOutput()
	return s, string(text), err
}

// TestStatusCommand: `socklb status` (what `kubectl socklb status` runs in
// each agent pod) reports a synced agent's health, frontends and map
// pressure, and, with the agent gone, says which part it could not read
// and what serves the hooks still (the pins).
func TestStatusCommand(t *testing.T) {
	e := startEcho(t)
	healthz, metrics := e.loggedAddr("serving health"), e.loggedAddr("serving metrics")
	var s agentstatus.Status
	var text string
	// The metrics follow the sync that inspect already shows.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s, text, _ = e.status(healthz, metrics)
		// Synced alone holds before the first sync's figures are in.
		if s.Synced() && s.Frontends >= 2 && s.PinnedFrontends == s.Frontends && !s.LastSync.IsZero() || time.Now().After(deadline) {
			break
		}
	}
	if !s.Synced() || s.Healthz != 200 || s.Frontends < 2 || s.PinnedFrontends != s.Frontends || s.Backends < 3 || len(s.Errors) > 0 {
		t.Errorf("status of a synced agent with 2 Services: %+v\n%s", s, text)
	}
	if _, ok := s.MapPressure["services"]; !ok || s.LastSync.IsZero() {
		t.Errorf("no map pressure for services, or no last sync: %+v", s)
	}
	for _, want := range []string{`Health:\s+OK`, "programmed, " + strconv.Itoa(s.Frontends) + " pinned", "Map pressure:"} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("socklb status lacks %q:\n%s", want, text)
		}
	}

	// `kubectl socklb inspect SERVICE` passes SERVICE on to socklb inspect.
	t.Run("inspect SERVICE", func(t *testing.T) {
		for _, name := range []string{"echo", "default/echo"} {
			out, err := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path(), name).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "10.96.0.10:80/TCP") || strings.Contains(string(out), "10.96.0.20") {
				t.Errorf("socklb inspect %s: %v\n%s", name, err, out)
			}
		}
		out, err := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path(), "other/echo").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `no frontend of Service "other/echo"`) {
			t.Errorf("socklb inspect other/echo: %v\n%s", err, out)
		}
	})

	e.stopAgent(syscall.SIGTERM)
	s, text, err := e.status(healthz, metrics)
	if err == nil {
		t.Errorf("socklb status exits 0 with the agent stopped:\n%s", text)
	}
	if s.Healthz != 0 || s.PinnedFrontends < 2 || !strings.Contains(text, "--healthz-address") || !strings.Contains(text, "healthz unreachable") {
		t.Errorf("status with the agent stopped: %+v\n%s", s, text)
	}
}
