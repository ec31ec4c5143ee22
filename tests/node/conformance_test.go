//go:build node

package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/tests/node"
)

// TestConformance runs the upstream suite (e2e.test v1.37.2) against this
// node with the chosen proxy. Its verdict per test is in the JUnit report,
// which tests/node/report turns into CONFORMANCE.md beside the control
// run's: a test that fails under both proxies is the environment, one that
// fails only under socklb is a socklb bug. This test fails only when the
// suite could not run.
func TestConformance(t *testing.T) {
	dir := *reportDir
	if dir == "" {
		dir = filepath.Join(n.Dir, "report")
	}
	// What this report was made from, written by the run itself.
	commit, _ := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	// The tree the datapath was built from: the report's reader compares
	// it with main's.
	tree, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD:pkg", "HEAD:bpf", "HEAD:cmd", "HEAD:deploy").Output()
	meta := fmt.Sprintf("proxy: %s\nnodes: %d\nginkgo procs: %d\nsocklb commit: %s\ntrees (pkg bpf cmd deploy): %s\nstarted: %s\nfocus: %s\nskip: %s\n",
		*proxy, len(n.Nodes), *procs, strings.TrimSpace(string(commit)), strings.Join(strings.Fields(string(tree)), " "),
		time.Now().UTC().Format(time.RFC3339), *focus, *skip)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.txt"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n.RunE2E(*focus, *skip, *procs, dir, filepath.Join(dir, "e2e.log"), 4*time.Hour); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filepath.Join(dir, "run.txt"), os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "duration: %s\n", time.Since(start).Round(time.Second))
	// A test that failed while the machine stood still says nothing about
	// the proxy: the kernel's stall reports during the suite go on record.
	if stalls, err := node.KernelStalls(start, time.Now()); err != nil {
		fmt.Fprintf(f, "machine stalls: unknown (%v)\n", err)
	} else {
		fmt.Fprintf(f, "machine stalls (kernel log): %d\n", len(stalls))
		for _, s := range stalls {
			fmt.Fprintf(f, "  %s\n", s)
		}
		if len(stalls) > 0 {
			t.Logf("the kernel reported %d stalls during the suite (run.txt): failures that overlap them may be the machine's", len(stalls))
		}
	}
	f.Close()
	// Last: the pair's promotion (tests/node/promote.sh) needs it.
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("JUnit report in %s", dir)
}
