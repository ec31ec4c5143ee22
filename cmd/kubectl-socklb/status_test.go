package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeExec answers each command by its first two words ("/socklb status")
// and records what ran.
type fakeExec struct {
	answers map[string]fakeAnswer
	ran     [][]string
}

type fakeAnswer struct {
	stdout, stderr string
	err            error
}

func (f *fakeExec) run(_ context.Context, _ *corev1.Pod, command []string, stdout, stderr io.Writer) error {
	f.ran = append(f.ran, command)
	a, ok := f.answers[strings.Join(command[:2], " ")]
	if !ok {
		return fmt.Errorf("fake exec: no answer for %v", command)
	}
	_, _ = io.WriteString(stdout, a.stdout)
	_, _ = io.WriteString(stderr, a.stderr)
	return a.err
}

// agentPodWithArgs is an agent pod whose DaemonSet args say the default
// pin directory and ports: what the plugin used to read, and misread when
// a --config file set others.
func agentPodWithArgs() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "socklb-x1"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: agentContainer,
			Command: []string{"/socklb", "agent"},
			Args:    []string{"--config=/etc/socklb/config.yaml", "--bpffs-path=/sys/fs/bpf/socklb", "--healthz-bind-address=0.0.0.0:10256"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// A status from an agent whose --config file moved its pins and ports.
const newStatus = `{"version": "v0.2.0", "healthz": 200, "frontends": 2, "frontendsProgrammed": 2,
  "agent": {"source": "process", "pid": 4242, "configFile": "/etc/socklb/config.yaml",
    "bpffsPath": "/sys/fs/bpf/from-config", "healthzAddress": "127.0.0.1:20256", "metricsAddress": "127.0.0.1:20249"}}`

// What socklb status printed before it read the agent's configuration.
const oldStatus = `{"version": "v0.1.0", "healthz": 200, "frontends": 2, "frontendsProgrammed": 2}`

// TestStatusReadsTheAgentsConfiguration: kubectl socklb asks socklb status
// in the pod with no pins or ports of its own, so the agent's effective
// configuration (a --config file included) decides where it looks; an
// image too old to report that configuration is an error naming the pod,
// its version and the fix, never a status read on the wrong ports.
func TestStatusReadsTheAgentsConfiguration(t *testing.T) {
	p := agentPodWithArgs()
	for _, c := range []struct {
		name       string
		answer     fakeAnswer
		wantHealth string
		wantErr    []string
	}{
		{name: "new agent", answer: fakeAnswer{stdout: newStatus}, wantHealth: "OK"},
		{name: "unhealthy agent: exit 1, JSON still read",
			answer:     fakeAnswer{stdout: strings.Replace(newStatus, `"healthz": 200`, `"healthz": 503`, 1), err: errors.New("command terminated with exit code 1")},
			wantHealth: "healthz 503"},
		{name: "agent too old to report its configuration", answer: fakeAnswer{stdout: oldStatus}, wantErr: []string{
			"pod kube-system/socklb-x1 on node node-a runs socklb v0.1.0, too old to report the agent's configuration",
			"upgrade the DaemonSet's image",
			"kubectl -n kube-system exec socklb-x1 -c socklb -- /socklb status --bpffs-path DIR --healthz-address ADDR --metrics-address ADDR"}},
		{name: "image older than socklb status", answer: fakeAnswer{stderr: `Error: unknown command "status" for "socklb"`, err: errors.New("command terminated with exit code 1")}, wantErr: []string{
			"[/socklb status -o json] in pod kube-system/socklb-x1 on node node-a: command terminated with exit code 1: Error: unknown command \"status\""}},
		{name: "no JSON and exit 0", answer: fakeAnswer{stdout: "socklb v0.0.1\n"}, wantErr: []string{
			"in pod kube-system/socklb-x1 printed no status", "is the image older than `socklb status`?"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeExec{answers: map[string]fakeAnswer{"/socklb status": c.answer}}
			cl := &cluster{run: f.run}
			got := cl.statuses(context.Background(), []corev1.Pod{*p})
			if len(f.ran) != 1 || !slices.Equal(f.ran[0], []string{"/socklb", "status", "-o", "json"}) {
				t.Errorf("ran %q, want only [/socklb status -o json]: no pins or ports from the pod's args", f.ran)
			}
			n := got[0]
			if c.wantErr == nil {
				if n.Error != "" || n.Status == nil || n.Status.Health() != c.wantHealth || n.Status.Agent.BPFFSPath != "/sys/fs/bpf/from-config" {
					t.Errorf("got %+v (status %+v), want health %q and the agent's pins", n, n.Status, c.wantHealth)
				}
				return
			}
			if n.Status != nil || n.ok() {
				t.Errorf("a status that cannot be trusted is shown: %+v", n.Status)
			}
			for _, w := range c.wantErr {
				if !strings.Contains(n.Error, w) {
					t.Errorf("error lacks %q:\n%s", w, n.Error)
				}
			}
		})
	}

	t.Run("pod not Running: no exec", func(t *testing.T) {
		f := &fakeExec{}
		q := agentPodWithArgs()
		q.Status.Phase = corev1.PodPending
		got := (&cluster{run: f.run}).statuses(context.Background(), []corev1.Pod{*q})
		if len(f.ran) != 0 || !strings.Contains(got[0].Error, "is Pending") {
			t.Errorf("ran %q; error %q", f.ran, got[0].Error)
		}
	})
}

// TestInspectUsesTheAgentsPins: kubectl socklb inspect reads the maps the
// agent pinned where its --config file said, not where the DaemonSet's
// args (or the default) would put them, and runs nothing when the pod
// cannot say where that is.
func TestInspectUsesTheAgentsPins(t *testing.T) {
	p := agentPodWithArgs()
	inspect := fakeAnswer{stdout: "10.96.0.10:80/TCP ...\n"}

	f := &fakeExec{answers: map[string]fakeAnswer{"/socklb status": {stdout: newStatus}, "/socklb inspect": inspect}}
	var out bytes.Buffer
	if err := (&cluster{run: f.run}).inspect(context.Background(), p, "chain", []string{"default/echo"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := []string{"/socklb", "inspect", "--bpffs-path=/sys/fs/bpf/from-config", "-o", "chain", "default/echo"}
	if len(f.ran) != 2 || !slices.Equal(f.ran[1], want) {
		t.Errorf("ran %q, want status then %q", f.ran, want)
	}
	if out.String() != inspect.stdout {
		t.Errorf("inspect's output not passed on: %q", out.String())
	}

	noAgent := strings.Replace(newStatus, `"source": "process"`, `"source": "defaults"`, 1)
	noAgent = strings.Replace(noAgent, `"version"`, `"errors": ["the agent's configuration: no `+"`socklb agent`"+` process in /proc"], "version"`, 1)
	for _, c := range []struct {
		name   string
		status string
		want   string
	}{
		{"too old", oldStatus, "runs socklb v0.1.0, too old to report the agent's configuration"},
		{"no agent found", noAgent, "socklb status in pod kube-system/socklb-x1 on node node-a could not read the agent's pin directory: the agent's configuration: no `socklb agent` process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeExec{answers: map[string]fakeAnswer{"/socklb status": {stdout: c.status}, "/socklb inspect": inspect}}
			err := (&cluster{run: f.run}).inspect(context.Background(), p, "chain", nil, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if len(f.ran) != 1 {
				t.Errorf("ran %q: inspect must not run on a guessed pin directory", f.ran)
			}
		})
	}
}
