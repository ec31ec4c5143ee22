//go:build node

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/tests/labclient/wire"
	"github.com/socklb/socklb/tests/node"
)

// upgradedMaxServices is the --max-services TestHelmUpgradeUnderLoad sets:
// not the agent's default (1<<18), so the upgrade changes the map layout
// and the new agent must migrate the pins (docs/upgrade-maps.md), not just
// adopt them.
const upgradedMaxServices = 1 << 16

// TestHelmUpgradeUnderLoad: `helm upgrade --reuse-values` changes
// maps.maxServices while a pod connects to a ClusterIP in a loop. The
// DaemonSet rolls its pod; the new agent copies the maps into new ones of
// the new size beside the pinned ones and switches the links to them. Not
// one connect fails, and afterwards the only pinned maps are the new ones.
func TestHelmUpgradeUnderLoad(t *testing.T) {
	if *proxy != "socklb-helm" {
		t.Skipf("helm upgrade needs socklb installed by the chart: -proxy=socklb-helm (this run: %s)", *proxy)
	}
	e := newEcho(t, 2)
	e.waitServing()
	ctx := context.Background()
	before := mapsDirs(t)
	if len(before) != 1 {
		t.Fatalf("before the upgrade: want one pinned maps directory, got %v", before)
	}
	pods := n.CP.Admin.CoreV1().Pods(node.HelmNamespace)
	// The client's node: its agent is the one whose upgrade matters here
	// (the DaemonSet rolls every node's, one at a time).
	first := nodeName(t, 0)
	old := &corev1.PodList{Items: []corev1.Pod{agentPod(t, first)}}
	// The loop outlasts the upgrade: the old pod's exit, the new pod's
	// start and its migration all fall inside it (checked below).
	const loop = 180 * time.Second
	type out struct {
		r   *wire.Result
		err error
	}
	done := make(chan out, 1)
	loopStart := time.Now()
	go func() {
		r, err := e.client(ctx, "loop", "--addr", e.clusterIP+":80", "--duration", loop.String(), "--interval", "2ms", "--timeout", "2s")
		done <- out{r, err}
	}()
	time.Sleep(5 * time.Second)
	set := fmt.Sprintf("maps.maxServices=%d", upgradedMaxServices)
	hout, err := n.Helm(os.Getenv(helmEnv), "upgrade", node.HelmRelease, filepath.Join(root, "charts", "socklb"), "-n", node.HelmNamespace, "--reuse-values", "--set", set)
	if err != nil {
		t.Fatalf("helm upgrade --reuse-values --set %s: %v\n%s", set, err, hout)
	}
	t.Logf("helm upgrade --reuse-values --set %s", set)
	want := fmt.Sprintf("--max-services=%d", upgradedMaxServices)
	waitFor(t, "a new Ready socklb pod with "+want, loop-10*time.Second, func() error {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=socklb", FieldSelector: "spec.nodeName=" + first})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.UID == old.Items[0].UID || !slices.Contains(p.Spec.Containers[0].Args, want) {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					t.Logf("new agent pod %s Ready %s after the loop began", p.Name, time.Since(loopStart).Round(time.Second))
					return nil
				}
			}
		}
		return fmt.Errorf("no new Ready pod with %s yet", want)
	})
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("connect loop across helm upgrade: %d connects, %v, errors %v", o.r.Attempts, o.r.Replies, o.r.Errors)
	if o.r.TotalErrors() != 0 || o.r.Attempts < 1000 {
		t.Errorf("want 1000+ connects and 0 failed: %+v", o.r)
	}
	after := mapsDirs(t)
	if len(after) != 1 || after[0] == before[0] {
		t.Fatalf("pinned maps directories: %v before the upgrade, %v after: want one new one, the old one unpinned", before, after)
	}
	if got := maxEntries(t, n.Nodes[0].Path(filepath.Join(node.BPFFSPath, "maps", after[0], "services"))); got != upgradedMaxServices {
		t.Errorf("services map of %s: max_entries %d, want %d", after[0], got, upgradedMaxServices)
	}
	t.Logf("pins migrated: maps/%s -> maps/%s", before[0], after[0])
	if err := n.CheckHooks(true); err != nil {
		t.Error(err)
	}
	// Still serving from the new maps, through the same links.
	e.waitServing()
}

// mapsDirs lists the agent's versioned map directories on the node's bpffs.
func mapsDirs(t *testing.T) []string {
	t.Helper()
	// The first node's bpffs, through its node process's root.
	ents, err := os.ReadDir(n.Nodes[0].Path(filepath.Join(node.BPFFSPath, "maps")))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		dirs = append(dirs, e.Name())
	}
	return dirs
}

func maxEntries(t *testing.T, pin string) int {
	t.Helper()
	out, err := exec.Command("bpftool", "-j", "map", "show", "pinned", pin).Output()
	if err != nil {
		t.Fatalf("bpftool map show pinned %s: %v", pin, err)
	}
	var m struct {
		MaxEntries int `json:"max_entries"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("bpftool map show pinned %s printed %q: %v", pin, strings.TrimSpace(string(out)), err)
	}
	return m.MaxEntries
}

// TestHelmTest: `helm test`, as a user runs it after installing. The
// chart's test pod (no privilege, no capability) connects to the
// kubernetes Service's ClusterIP and passes only when its socket holds a
// backend's address while getpeername reports the ClusterIP: socklb's
// translation at connect(), which kube-proxy's DNAT would not give.
func TestHelmTest(t *testing.T) {
	if *proxy != "socklb-helm" {
		t.Skipf("helm test needs socklb installed by the chart: -proxy=socklb-helm (this run: %s)", *proxy)
	}
	out, err := n.Helm(os.Getenv(helmEnv), "test", node.HelmRelease, "-n", node.HelmNamespace, "--timeout", "2m")
	if err != nil {
		logs, _ := n.Kubectl("-n", node.HelmNamespace, "logs", "socklb-test-connect")
		t.Fatalf("helm test: %v\n%s\nthe test pod's log:\n%s", err, out, logs)
	}
	if !strings.Contains(out, "socklb-test-connect") || !strings.Contains(out, "Succeeded") {
		t.Fatalf("helm test passed without running socklb-test-connect:\n%s", out)
	}
	t.Logf("helm test:\n%s", out)
}
