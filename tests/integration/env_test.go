package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/tests/lab"
)

var socklbBin string

// TestMain builds the agent binary once; each test runs it as a real
// process, the way a DaemonSet would.
func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			return m.Run() // every test skips and says why
		}
		dir, err := os.MkdirTemp("", "socklb-it-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		root, err := lab.ModuleRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		socklbBin = filepath.Join(dir, "socklb")
		build := exec.Command("go", "build", "-o", socklbBin, "./cmd/socklb")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building socklb: %v\n%s", err, out)
			return 1
		}
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
	fs        *lab.BPFFS
	manifests string

	mu     sync.Mutex
	agent  *exec.Cmd
	logs   *bytes.Buffer
	exited chan struct{}
}

func newEnv(t *testing.T, pods ...lab.PodSpec) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, a cgroup and BPF pins (CI runs this as root)")
	}
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
		out, err := exec.Command(socklbBin, "cleanup", "--bpffs-path", e.fs.Path()).CombinedOutput()
		if err != nil {
			t.Errorf("socklb cleanup: %v: %s", err, out)
		}
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
	// Write and rename, as editors and ConfigMap mounts do, so the agent
	// never reads a half-written file.
	tmp := filepath.Join(e.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.manifests, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) startAgent(extra ...string) {
	e.t.Helper()
	e.startAgentBin(socklbBin, extra...)
}

// startAgentBin starts the agent from another build of socklb (upgrades).
func (e *env) startAgentBin(bin string, extra ...string) {
	e.t.Helper()
	args := append([]string{"agent",
		"--manifests", e.manifests,
		"--node-name", "node-a",
		"--cgroup-path", e.cg.Path(),
		"--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", "127.0.0.1:0",
		"--metrics-bind-address", "127.0.0.1:0",
	}, extra...)
	cmd := exec.Command(bin, args...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{mu: &e.mu, w: logs}, &lockedWriter{mu: &e.mu, w: logs}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	e.mu.Lock()
	e.agent, e.logs, e.exited = cmd, logs, exited
	e.mu.Unlock()
}

// stopAgent signals the agent and waits for it to exit.
func (e *env) stopAgent(sig syscall.Signal) {
	e.mu.Lock()
	cmd, exited := e.agent, e.exited
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (e *env) agentLog() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logs == nil {
		return ""
	}
	return e.logs.String()
}

func (e *env) inspect() string {
	out, _ := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path()).CombinedOutput()
	return string(out)
}

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

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// scrape fetches the agent's /metrics, at the address it logged.
func (e *env) scrape() string {
	e.t.Helper()
	re := regexp.MustCompile(`"serving metrics" addr="([^"]+)"`)
	m := re.FindStringSubmatch(e.agentLog())
	// A restarted agent adopts its pins before it serves metrics.
	for deadline := time.Now().Add(10 * time.Second); m == nil; m = re.FindStringSubmatch(e.agentLog()) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the agent did not log its metrics address within 10 s:\n%s", e.agentLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}
