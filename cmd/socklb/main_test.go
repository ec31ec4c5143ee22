package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs main() itself when asked, so TestCommandLine checks the
// exit codes and streams a user sees, not cobra's return values.
func TestMain(m *testing.M) {
	if os.Getenv("SOCKLB_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"socklb"}, strings.Fields(os.Getenv("SOCKLB_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	if args, ok := os.LookupEnv("SOCKLB_TEST_LOG_SAMPLE"); ok {
		logSample(strings.Fields(args))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runMainFor(t, 2*time.Minute, args...)
}

// runMainFor is runMain for an agent that may start for good: it is sent
// SIGTERM after timeout (an agent stops with exit 0).
func runMainFor(t *testing.T, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), "SOCKLB_TEST_RUN_MAIN=1", "SOCKLB_TEST_ARGS="+strings.Join(args, " "))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Logf("socklb %s: still running after %s, stopped with SIGTERM", strings.Join(args, " "), timeout)
	}
	if cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// TestCommandLine: help exits 0 on stdout with the flags grouped as
// kube-proxy's are; a mistake exits 1 naming the flag and the fix.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantStdout []string
		wantStderr []string
	}{
		{name: "root help", args: []string{"-h"}, wantStdout: []string{"agent", "inspect", "cleanup", "mount-cgroup", "version", "completion"}},
		{name: "agent -h", args: []string{"agent", "-h"},
			wantStdout: []string{"API source flags:", "Datapath flags:", "Health and metrics flags:", "Security flags:", "Logging flags:", "Config file flags:",
				"--kubeconfig", "--max-backends", "--healthz-bind-address", "--external-ip-cidrs", "--logging-format", "-v, --v", "--config", "--write-config-to"}},
		{name: "agent --help", args: []string{"agent", "--help"}, wantStdout: []string{"Datapath flags:"}},
		{name: "inspect -h", args: []string{"inspect", "-h"}, wantStdout: []string{"--bpffs-path", "-o, --output"}},
		{name: "cleanup -h", args: []string{"cleanup", "-h"}, wantStdout: []string{"--force"}},
		{name: "mount-cgroup -h", args: []string{"mount-cgroup", "-h"}, wantStdout: []string{"--cgroup-ns"}},
		{name: "version", args: []string{"version"}, wantStdout: []string{"socklb dev"}},
		{name: "completion", args: []string{"completion", "bash"}, wantStdout: []string{"bash completion", "__start_socklb"}},
		{name: "flag value completion", args: []string{"__complete", "agent", "--logging-format="}, wantStdout: []string{"text\njson\n"}},
		{name: "no command", args: nil, wantStdout: []string{"Available Commands"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 1, wantStderr: []string{`unknown command "frobnicate"`}},
		{name: "unknown flag", args: []string{"agent", "--frobnicate"}, code: 1, wantStderr: []string{"socklb agent: unknown flag: --frobnicate", `"socklb agent -h"`}},
		{name: "go-style single dash", args: []string{"agent", "-kubeconfig", "k"}, code: 1, wantStderr: []string{"socklb agent: unknown shorthand flag: 'k'"}},
		{name: "validation", args: []string{"agent", "--max-services", "0"}, code: 1, wantStderr: []string{"socklb agent: --max-services=0: must be between 1 and 2^31"}},
		{name: "bad logging format", args: []string{"agent", "--logging-format", "xml"}, code: 1, wantStderr: []string{"socklb agent: logging:", `"xml"`}},
		{name: "bad output", args: []string{"inspect", "-o", "yaml"}, code: 1, wantStderr: []string{`socklb inspect: -o "yaml": unknown output format; use chain or json`}},
		{name: "mount-cgroup without DIR", args: []string{"mount-cgroup"}, code: 1, wantStderr: []string{"usage: socklb mount-cgroup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tc.args...)
			if code != tc.code {
				t.Errorf("socklb %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("socklb %s: stdout lacks %q:\n%s", strings.Join(tc.args, " "), w, stdout)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("socklb %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), w, stderr)
				}
			}
		})
	}
}

// TestWriteConfigTo: --write-config-to exits 0 without starting the agent
// and writes a file --config reads back to the same configuration.
func TestWriteConfigTo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "socklb.yaml")
	code, stdout, stderr := runMain(t, "agent", "--write-config-to", path, "--max-backends", "5000", "--nodeport-addresses", "primary,10.0.0.0/8", "-v", "3")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"apiVersion: socklb.io/v1alpha1", "kind: SocklbConfiguration", "maxBackends: 5000", "- primary", "verbosity: 3", "bpffsPath: /sys/fs/bpf/socklb"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("written config lacks %q:\n%s", w, b)
		}
	}
	if strings.Contains(string(b), "nodeName") {
		t.Errorf("written config pins this host's node name:\n%s", b)
	}
	f, err := parseAgentFlags([]string{"--config", path})
	if err != nil {
		t.Fatalf("reading back %s: %v", path, err)
	}
	if f.maxBackends != 5000 || !f.nodePortAddresses.primary || len(f.nodePortAddresses.prefixes) != 1 || f.logging.Verbosity != 3 {
		t.Errorf("read back %+v", f)
	}
}
