// Package cluster runs a real Kubernetes control plane for tests and
// benchmarks: etcd, kube-apiserver and kube-controller-manager built from
// their Go modules (tests/e2e/tools, `make e2e-tools`), listening on
// 127.0.0.1 only, with certificates made on the fly and every process
// managed by its PID (testkit.Proc).
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Logf prints progress to stderr; set it to redirect.
var Logf = func(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", args...)
}

// ControlPlaneBinaries are what Start needs in the tools directory.
var ControlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// ToolsDir returns the directory of the binaries built by
// tests/e2e/tools/build.sh (or $SOCKLB_E2E_TOOLS), or why they cannot be
// used: a reason to skip, with what to run. root is the module root.
func ToolsDir(root string, need ...string) (dir, reason string) {
	dir = os.Getenv("SOCKLB_E2E_TOOLS")
	if dir == "" {
		out, err := exec.Command("sh", filepath.Join(root, "tests/e2e/tools/build.sh"), "--dir").Output()
		if err != nil {
			return "", fmt.Sprintf("cannot locate the control plane binaries (tests/e2e/tools/build.sh --dir: %v)", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if len(need) == 0 {
		need = ControlPlaneBinaries
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Sprintf("tool binaries not built (%s missing in %s): run `make e2e-tools` (cold: ~15 min)", b, dir)
		}
	}
	return dir, ""
}
