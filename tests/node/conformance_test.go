//go:build node

package node_test

import (
	"path/filepath"
	"testing"
	"time"
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
	if err := n.RunE2E(*focus, *skip, dir, filepath.Join(dir, "e2e.log"), 4*time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Logf("JUnit report in %s", dir)
}
