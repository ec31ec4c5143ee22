package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The upstream tests `make conformance` runs: the Services and
// EndpointSlice tests of sig-network, every [Conformance] test of
// sig-network, and the ServiceAccount test whose pod reaches the API
// server through the `kubernetes` Service.
const (
	DefaultFocus = `\[sig-network\] (Services|EndpointSlice|EndpointSliceMirroring) |\[sig-network\] .*\[Conformance\]|\[sig-auth\] ServiceAccounts .*OIDC discovery`
	// What cannot apply to one node with no cloud and no route off the
	// machine, or is disruptive to the node itself. The suite itself
	// skips tests that need more than one node. The DNS tests are left
	// out of the default run for time (each polls for minutes); CoreDNS
	// runs, so CONFORMANCE_FOCUS can select them.
	DefaultSkip = `\[Disruptive\]|\[Flaky\]|\[Feature:|LoadBalancer|\[sig-network\] Networking .*IPv6|ExternalName|\[sig-network\] DNS`
)

// RunE2E runs the tools' e2e.test against the node with focus and skip,
// its JUnit report into reportDir and its output into logPath. It returns
// an error only when the suite did not run; failed tests are in the
// report.
func (n *Node) RunE2E(focus, skip, reportDir, logPath string, timeout time.Duration) error {
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(n.Tools, "e2e.test")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the suite is not built (tests/e2e/tools/build.sh --node): %w", err)
	}
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin,
		"--kubeconfig="+n.CP.AdminKubeconfig,
		"--kubectl-path="+filepath.Join(n.Tools, "kubectl"),
		"--provider=local",
		"--num-nodes=1",
		"--report-dir="+reportDir,
		"--disable-log-dump",
		"--e2e-output-dir="+filepath.Join(n.Dir, "e2e-output"),
		"--container-runtime-endpoint=unix://"+n.Containerd.Socket,
		"--kubelet-root-dir="+filepath.Join(n.Dir, "kubelet", "root"),
		"--ginkgo.focus="+focus,
		"--ginkgo.skip="+skip,
		"--ginkgo.timeout="+timeout.String(),
		// The same order under both proxies.
		"--ginkgo.seed=1",
		"--ginkgo.no-color",
		"--ginkgo.v",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = n.Dir
	start := time.Now()
	runErr := cmd.Run()
	reports, _ := filepath.Glob(filepath.Join(reportDir, "junit*.xml"))
	if len(reports) == 0 {
		b, _ := os.ReadFile(logPath)
		lines := strings.Split(string(b), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		return fmt.Errorf("e2e.test wrote no JUnit report (%v) after %s:\n%s", runErr, time.Since(start).Round(time.Second), strings.Join(lines, "\n"))
	}
	return nil
}
