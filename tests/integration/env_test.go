package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
)

var socklbBin string

// TestMain builds the agent binary once; each test runs it as a real
// process, the way a DaemonSet would.
func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			return m.Run() // every test skips and says why
		}
		var err error
		if socklbBin, err = testkit.BuildAgent(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testkit.RemoveAgent()
		defer lab.RemoveLabclient()
		return m.Run()
	}()
	os.Exit(code)
}

// env is one lab: a client namespace, pod namespaces with servers, a fresh
// child cgroup, a private bpffs, a manifests directory and the agent.
type env struct {
	t         *testing.T
	lab       *lab.Lab
	cg        *lab.Cgroup
	fs        *testkit.BPFFS
	manifests string

	mu    sync.Mutex
	agent *testkit.AgentProcess
}

func newEnv(t *testing.T, pods ...lab.PodSpec) *env {
	t.Helper()
	testkit.RequireRoot(t, "creates network namespaces, a cgroup and BPF pins")
	e := &env{t: t, manifests: t.TempDir()}
	w, err := lab.NewWorld(pods...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { check(t, w.Close()) })
	e.cg, e.fs, e.lab = w.Cgroup, w.BPFFS, w.Lab
	// Registered last, so it runs first: stop the agent, then detach.
	t.Cleanup(func() {
		e.stopAgent(syscall.SIGTERM)
		check(t, testkit.CleanupPins(socklbBin, e.fs.Path()))
		if t.Failed() {
			t.Logf("agent log:\n%s", e.agentLog())
		}
	})
	return e
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

func (e *env) writeManifest(name, body string) {
	e.t.Helper()
	writeManifest(e.t, e.manifests, name, body)
}

// writeManifest writes and renames, as editors and ConfigMap mounts do, so
// the agent never reads a half-written file.
func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func (e *env) startAgent(extra ...string) {
	e.t.Helper()
	e.startAgentBin(socklbBin, extra...)
}

// startAgentBin starts the agent from another build of socklb (upgrades).
func (e *env) startAgentBin(bin string, extra ...string) {
	e.t.Helper()
	args := append([]string{
		"--manifests", e.manifests,
		"--node-name", "node-a",
		"--cgroup-path", e.cg.Path(),
		"--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "127.0.0.1:0",
	}, extra...)
	a, err := testkit.StartAgent(bin, filepath.Join(e.t.TempDir(), "socklb-agent.log"), args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.agent = a
	e.mu.Unlock()
}

// current is the agent started last (a test may restart it).
func (e *env) current() *testkit.AgentProcess {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.agent
}

// stopAgent signals the agent and waits for it to exit.
func (e *env) stopAgent(sig syscall.Signal) { e.current().StopWith(sig) }

func (e *env) agentLog() string {
	if a := e.current(); a != nil {
		return a.Log()
	}
	return ""
}

func (e *env) inspect() string {
	out, _ := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path()).CombinedOutput()
	return string(out)
}

// waitLog polls the agent's log until re matches it and returns the
// match, or nil after timeout. A test that waits for an effect the agent
// has on pins or maps checks its log line with this: the agent logs after
// the effect, so a single read right after the effect can come too soon.
func (e *env) waitLog(timeout time.Duration, re *regexp.Regexp) []string {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(e.agentLog()); m != nil || time.Now().After(deadline) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls ok until it holds or timeout passes, and says which.
func eventually(timeout time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// destroyedRE is the sync's log line after it destroyed one socket.
var destroyedRE = regexp.MustCompile(`sockets_destroyed=1\b`)

// waitInspect polls `socklb inspect` until it contains every want string.
func (e *env) waitInspect(timeout time.Duration, want ...string) string {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := e.inspect()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(out, w)
		}
		if ok {
			return out
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("inspect never showed %q within %s; last output:\n%s\nagent log:\n%s", want, timeout, out, e.agentLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mapPin is where the map the hooks serve from is pinned.
func (e *env) mapPin(name string) string {
	e.t.Helper()
	dir, err := datapath.PinnedMapsDir(e.fs.Path())
	if err != nil {
		e.t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

func (e *env) client() *lab.Client { return e.lab.Client("") }

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// scrape fetches the agent's /metrics, at the address it logged.
func (e *env) scrape() string {
	e.t.Helper()
	// A restarted agent adopts its pins before it serves metrics.
	addr, err := e.current().LoggedAddr("metrics", 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := testkit.Scrape(addr)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}
