package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The upstream tests `make conformance` runs (issue #19): every
// [sig-network] test that needs no cloud provider and no machine outside
// this one. Focus: every [Conformance] test of sig-network (DNS and the
// Service type changes included), every Services test ([Serial] and
// [Disruptive] included: the suite skips those it cannot do here and says
// why), the Service proxy's own suites, EndpointSlice(Mirroring), HostPort,
// and the ServiceAccount test whose pod reaches the API server through the
// `kubernetes` Service. ExcludeRules is what is left out and why;
// CONFORMANCE.md lists it.
const DefaultFocus = `\[sig-network\] .*\[Conformance\]` +
	`|\[sig-network\] (Services|EndpointSlice|EndpointSliceMirroring|Conntrack|Traffic Distribution|Topology Hints|KubeProxy|HostPort|DNS) ` +
	`|\[sig-network\] Networking Granular Checks: Services` +
	`|\[sig-auth\] ServiceAccounts .*OIDC discovery`

// ExcludeRule is one pattern of the skip and the reason it applies. A rule
// with Below applies only to a cluster of fewer nodes than that.
type ExcludeRule struct {
	Pattern, Reason string
	Below           int
}

// ExcludeRules make DefaultSkip. Each is listed in CONFORMANCE.md.
var ExcludeRules = []ExcludeRule{
	{`\[Flaky\]`, "upstream marks the test flaky: it is not run in upstream's own conformance jobs either", 0},
	{`IPv6|\[Feature:IPv6DualStack\]|[Dd]ual[- ]?[Ss]tack`, "the cluster is IPv4 single-stack (the kernel here has IPv6, but kubelet, the Service CIDR and the pod CIDRs are IPv4 only)", 0},
	{`\[Feature:SCTPConnectivity\]`, "the kernel has no SCTP (CONFIG_IP_SCTP unset)", 0},
	{`\[Feature:KubeProxyNFAcct\]`, "reads kube-proxy's own iptables counter (kubeproxy_iptables_localhost_nodeports_accepted_packets_total) and skips unless the proxy is kube-proxy in iptables mode with route_localnet: it tests kube-proxy's implementation, not what a Service does", 0},
	{`DNS configMap nameserver Forward PTR lookup`, "looks up 8.8.8.8's PTR record (dns.google) through the cluster DNS's upstream before it sets its own: needs a public DNS server on the internet (it failed so under the control, dns_common.go:108, in the first three-node pair)", 0},
	{`Traffic Distribution should route traffic (correctly between pods on multiple nodes|to an endpoint on the same node or fall back to same zone)`,
		"needs 3 zones of at least 2 nodes each: run with NODES=6 (the nodes' zones are zone-1..3 round robin)", 6},
}

// OutsideFocus are the sig-network suites the focus leaves out, and why.
var OutsideFocus = []ExcludeRule{
	{`\[sig-network\] LoadBalancers`, "needs a cloud provider's load balancer controller: none runs here and none can be reached", 0},
	{`\[sig-network\] (Ingress|IngressClass)` + " (non-[Conformance])", "needs an ingress controller or a cloud; the [Conformance] API tests are in the focus", 0},
	{`\[sig-network\] (NetworkPolicy|Netpol|Networking IPerf|Firewall|ClusterDns|CVE|NoSNAT)`, "not the Service proxy's job (a CNI's, a cloud's) or needs machines outside this one", 0},
}

// Skip is the rules' patterns that apply to a cluster of nodes nodes.
func Skip(nodes int) string {
	var ps []string
	for _, r := range ExcludeRules {
		if r.Below == 0 || nodes < r.Below {
			ps = append(ps, r.Pattern)
		}
	}
	return strings.Join(ps, "|")
}

// Zone is node i's topology.kubernetes.io/zone: three zones, round robin.
func Zone(i int) string { return fmt.Sprintf("zone-%d", (i-1)%3+1) }

// RunE2E runs the tools' e2e.test against the cluster with focus and skip,
// on procs ginkgo processes ([Serial] tests alone, at the end), its JUnit
// report into reportDir and its output into logPath. It returns an error
// only when the suite did not run; failed tests are in the report.
func (n *Cluster) RunE2E(focus, skip string, procs int, reportDir, logPath string, timeout time.Duration) error {
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
	args := []string{
		"--kubeconfig=" + n.CP.AdminKubeconfig,
		"--kubectl-path=" + filepath.Join(n.Tools, "kubectl"),
		"--provider=local",
		fmt.Sprintf("--num-nodes=%d", len(n.Nodes)),
		"--report-dir=" + reportDir,
		"--disable-log-dump",
		"--e2e-output-dir=" + filepath.Join(n.Dir, "e2e-output"),
	}
	ginkgo := []string{
		"--focus=" + focus,
		"--skip=" + skip,
		"--timeout=" + timeout.String(),
		// The same order under both proxies.
		"--seed=1",
		"--no-color",
		"-v",
	}
	var cmd *exec.Cmd
	if procs > 1 {
		cli := append([]string{fmt.Sprintf("--procs=%d", procs)}, ginkgo...)
		cli = append(append(cli, bin, "--"), args...)
		cmd = exec.Command(filepath.Join(n.Tools, "ginkgo"), cli...)
	} else {
		for _, g := range ginkgo {
			args = append(args, "--ginkgo."+strings.TrimLeft(g, "-"))
		}
		cmd = exec.Command(bin, args...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = n.Dir
	fmt.Fprintf(log, "# %s\n", strings.Join(cmd.Args, " "))
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
