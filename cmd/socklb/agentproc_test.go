package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/socklb/socklb/pkg/agentstatus"
)

// fakeProc is a /proc with the links and files findAgent reads.
type fakeProc struct {
	t    *testing.T
	dir  string
	root string // every process's root: the container's filesystem
}

func newFakeProc(t *testing.T, self int, selfNS string) *fakeProc {
	p := &fakeProc{t: t, dir: t.TempDir(), root: t.TempDir()}
	p.process(self, selfNS, "/", "/socklb", "status", "-o", "json")
	if err := os.Symlink(strconv.Itoa(self), filepath.Join(p.dir, "self")); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *fakeProc) process(pid int, mntNS, cwd string, argv ...string) {
	d := filepath.Join(p.dir, strconv.Itoa(pid))
	must(p.t, os.MkdirAll(filepath.Join(d, "ns"), 0o755))
	cmdline := ""
	if len(argv) > 0 {
		cmdline = strings.Join(argv, "\x00") + "\x00"
	}
	must(p.t, os.WriteFile(filepath.Join(d, "cmdline"), []byte(cmdline), 0o644))
	must(p.t, os.Symlink("mnt:["+mntNS+"]", filepath.Join(d, "ns", "mnt")))
	must(p.t, os.Symlink(p.root, filepath.Join(d, "root")))
	must(p.t, os.Symlink(cwd, filepath.Join(d, "cwd")))
}

func (p *fakeProc) file(path, content string) {
	full := filepath.Join(p.root, path)
	must(p.t, os.MkdirAll(filepath.Dir(full), 0o755))
	must(p.t, os.WriteFile(full, []byte(content), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const testConfig = `apiVersion: socklb.io/v1alpha1
kind: SocklbConfiguration
bpffsPath: /sys/fs/bpf/other
healthzBindAddress: 0.0.0.0:20256
metricsBindAddress: 127.0.0.1:9999
`

// TestFindAgent: socklb status reads the pins and ports of the agent in
// its own container as that agent parsed them (its --config file under
// its flags), not its own flags' defaults: an install configured through
// --config is read right. Another pod's agent on the node (hostPID, a
// rolling update) is not taken for it.
func TestFindAgent(t *testing.T) {
	p := newFakeProc(t, 100, "1")
	p.file("/etc/socklb/config.yaml", testConfig)
	p.process(200, "1", "/", "/socklb", "agent", "--config=/etc/socklb/config.yaml", "--metrics-bind-address=0.0.0.0:20249", "--max-revnat=5")
	p.process(300, "2", "/", "/socklb", "agent", "--bpffs-path=/sys/fs/bpf/old-pod")
	p.process(400, "1", "/", "/bin/sh", "-c", "socklb agent")
	p.process(500, "1", "/") // a kernel thread: no command line

	a, err := agentFromProc(p.dir, agentstatus.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	want := agentstatus.Agent{Source: agentstatus.SourceProcess, PID: 200, ConfigFile: "/etc/socklb/config.yaml",
		BPFFSPath: "/sys/fs/bpf/other", HealthzAddress: "127.0.0.1:20256", MetricsAddress: "127.0.0.1:20249"}
	if a != want {
		t.Errorf("agent:\n got %+v\nwant %+v (the file's pins and healthz, the flag's metrics, both on loopback)", a, want)
	}

	t.Run("relative --config, from the agent's working directory", func(t *testing.T) {
		p := newFakeProc(t, 100, "1")
		p.file("/etc/socklb/config.yaml", testConfig)
		p.process(200, "1", "/etc/socklb", "/socklb", "agent", "--config", "config.yaml")
		a, err := agentFromProc(p.dir, agentstatus.Agent{})
		if err != nil || a.BPFFSPath != "/sys/fs/bpf/other" || a.ConfigFile != "config.yaml" {
			t.Errorf("got %+v, %v", a, err)
		}
	})

	t.Run("flags only, kube-proxy's defaults", func(t *testing.T) {
		p := newFakeProc(t, 100, "1")
		p.process(200, "1", "/", "/usr/local/bin/socklb", "agent", "--healthz-bind-address=[::]:10356")
		a, err := agentFromProc(p.dir, agentstatus.Agent{})
		if err != nil || a.BPFFSPath != defaultBPFFS || a.HealthzAddress != "[::1]:10356" || a.MetricsAddress != "127.0.0.1:10249" || a.ConfigFile != "" {
			t.Errorf("got %+v, %v", a, err)
		}
	})

	t.Run("run on the node: the only agent", func(t *testing.T) {
		p := newFakeProc(t, 100, "host")
		p.process(300, "2", "/", "/socklb", "agent", "--bpffs-path=/sys/fs/bpf/x")
		if a, err := agentFromProc(p.dir, agentstatus.Agent{}); err != nil || a.PID != 300 || a.BPFFSPath != "/sys/fs/bpf/x" {
			t.Errorf("got %+v, %v", a, err)
		}
	})

	defaults := agentstatus.Agent{BPFFSPath: defaultBPFFS, HealthzAddress: "127.0.0.1:10256", MetricsAddress: "127.0.0.1:10249"}
	for _, c := range []struct {
		name  string
		setup func(p *fakeProc)
		want  []string
	}{
		{"no agent", func(p *fakeProc) {}, []string{"no `socklb agent` process in", "kubectl -n kube-system exec POD -c socklb -- /socklb status"}},
		{"two agents, neither here", func(p *fakeProc) {
			p.process(300, "2", "/", "/socklb", "agent")
			p.process(301, "3", "/", "/socklb", "agent")
		}, []string{"2 `socklb agent` processes (pids 300, 301), none in this container", "--bpffs-path, --healthz-address and --metrics-address"}},
		{"config file gone", func(p *fakeProc) {
			p.process(200, "1", "/", "/socklb", "agent", "--config=/etc/socklb/config.yaml")
		}, []string{"agent process 200: --config:", "config.yaml"}},
		{"config file refused", func(p *fakeProc) {
			p.file("/etc/socklb/config.yaml", testConfig+"bpffsPth: /x\n")
			p.process(200, "1", "/", "/socklb", "agent", "--config=/etc/socklb/config.yaml")
		}, []string{"agent process 200: --config /etc/socklb/config.yaml", "bpffsPth"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newFakeProc(t, 100, "1")
			c.setup(p)
			a, err := agentFromProc(p.dir, defaults)
			if err == nil {
				t.Fatalf("no error; agent %+v", a)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			// The defaults are still asked, and said to be the defaults:
			// the error keeps the status from reading OK.
			if want := defaults; a.Source != agentstatus.SourceDefaults || a.BPFFSPath != want.BPFFSPath || a.HealthzAddress != want.HealthzAddress {
				t.Errorf("agent %+v: want the defaults, source %q", a, agentstatus.SourceDefaults)
			}
		})
	}
}

// TestReadStatusListenerOff: an agent started with an empty bind address
// serves no /healthz or /metrics; status says so rather than asking "".
func TestReadStatusListenerOff(t *testing.T) {
	s := readStatus(context.Background(), agentstatus.Agent{Source: agentstatus.SourceProcess, BPFFSPath: filepath.Join(t.TempDir(), "none")})
	got := strings.Join(s.Errors, "\n")
	for _, w := range []string{"/healthz: the agent serves none (its --healthz-bind-address is empty)", "/metrics: the agent serves none", "pinned maps:"} {
		if !strings.Contains(got, w) {
			t.Errorf("errors lack %q:\n%s", w, got)
		}
	}
	if s.Agent == nil || s.Agent.Source != agentstatus.SourceProcess {
		t.Errorf("status does not say whose agent it read: %+v", s.Agent)
	}
}
