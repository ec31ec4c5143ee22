// Package e2e runs the socklb agent against a real control plane: etcd,
// kube-apiserver and kube-controller-manager built from their Go modules
// (tests/e2e/tools, `make e2e-tools`), listening on 127.0.0.1 only. The
// EndpointSlices are made by the real EndpointSlice controller from Pods
// whose status the test writes (there is no kubelet); the Pods' addresses
// are network namespaces of an internal/lab lab, and every connection is made
// from the lab's client namespace, which has no default route.
//
// The agent authenticates with a token of the ServiceAccount in
// deploy/base/rbac.yaml, bound to exactly that ClusterRole.
//
// Needs root (network namespaces, a child cgroup, BPF) and the tool
// binaries; without either, the tests skip and say why. `make e2e` builds
// the binaries first (cached), so in CI nothing skips.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

// nodeName is the Node the agent runs on and the Pods are bound to.
const nodeName = "node-a"

// The DaemonSet's identity, as deploy/base/rbac.yaml names it.
const (
	saNamespace = "kube-system"
	saName      = "socklb"
)

var (
	// skipReason is set when the environment cannot run these tests.
	skipReason string
	// setupErr is set when it should have, and failed: tests fail with it.
	setupErr error

	root            string // module root
	socklbBin       string
	cp              *cluster.ControlPlane
	agentKubeconfig string
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = testkit.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tools, reason := cluster.ToolsDir(root)
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root: runs network namespaces, a child cgroup, BPF and a control plane (CI runs `make e2e` as root)"
	case reason != "":
		skipReason = reason
	}
	if skipReason != "" {
		return m.Run() // the cluster tests skip and say why; the static ones run
	}

	dir, err := os.MkdirTemp("", "socklb-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keep := false
	defer func() {
		if keep {
			_ = os.RemoveAll(filepath.Join(dir, "etcd"))
			logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	defer lab.RemoveLabclient()

	if socklbBin = os.Getenv("SOCKLB_E2E_AGENT"); socklbBin == "" {
		if socklbBin, err = testkit.BuildAgent(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testkit.RemoveAgent()
	}
	if _, err := lab.BuildLabclient(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	start := time.Now()
	cluster.Logf = logf
	cp, setupErr = cluster.Start(tools, dir)
	defer cp.Stop()
	if setupErr == nil {
		setupErr = setupCluster(dir)
	}
	if setupErr != nil {
		keep = true
		setupErr = fmt.Errorf("control plane: %w", setupErr)
		fmt.Fprintln(os.Stderr, setupErr)
		if cp != nil {
			fmt.Fprint(os.Stderr, cp.LogTails(30))
		}
	} else {
		logf("control plane up in %s (tools: %s)", time.Since(start).Round(time.Millisecond), tools)
	}
	code := m.Run()
	printLatencies()
	if code != 0 {
		keep = true
	}
	return code
}

// setupCluster makes what every test shares: this node's Node object, the
// RBAC of deploy/base/rbac.yaml (applied for real with kubectl), and a
// kubeconfig holding a token of its ServiceAccount for the agent.
func setupCluster(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cp.Admin.CoreV1().Nodes().Create(ctx, testkit.Node(nodeName, ""), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", nodeName, err)
	}
	if out, err := kubectl("apply", "-f", filepath.Join(root, "deploy/base/rbac.yaml")); err != nil {
		return fmt.Errorf("kubectl apply -f deploy/base/rbac.yaml: %w\n%s", err, out)
	}
	tr, err := cp.Admin.CoreV1().ServiceAccounts(saNamespace).CreateToken(ctx, saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for %s/%s: %w", saNamespace, saName, err)
	}
	agentKubeconfig = filepath.Join(dir, "socklb.kubeconfig")
	return cluster.WriteKubeconfig(agentKubeconfig, cp.Server, cp.PKI.CAPEM, "system:serviceaccount:"+saNamespace+":"+saName, tr.Status.Token)
}

// kubectl runs the real kubectl as the cluster admin.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(cp.Tools, "kubectl"), append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// needCluster skips the test when the environment cannot run it and fails
// it when the control plane did not come up.
func needCluster(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if err := cp.Alive(); err != nil {
		t.Fatal(err)
	}
}

// Network programming latencies measured by the tests: from the API write
// to the BPF maps holding its effect.
var latencies struct {
	mu      sync.Mutex
	samples []latency
}

type latency struct {
	what string
	d    time.Duration
}

func recordLatency(t *testing.T, what string, d time.Duration) {
	t.Helper()
	t.Logf("network programming latency: %s: %s", what, d.Round(time.Millisecond))
	latencies.mu.Lock()
	defer latencies.mu.Unlock()
	latencies.samples = append(latencies.samples, latency{what, d})
}

func printLatencies() {
	latencies.mu.Lock()
	defer latencies.mu.Unlock()
	s := latencies.samples
	if len(s) == 0 {
		return
	}
	ds := make([]time.Duration, len(s))
	for i, l := range s {
		ds[i] = l.d
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	fmt.Printf("\nnetwork programming latency, API write -> BPF map (%d changes): min %s, median %s, max %s\n",
		len(ds), ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	for _, l := range s {
		fmt.Printf("    %-60s %s\n", l.what, l.d.Round(time.Millisecond))
	}
}
