package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// TestExternalIPHijackRefused: CVE-2020-8554. A Service author puts an
// address that is not this node's into spec.externalIPs; by default the
// agent leaves it alone, so a connect to it from the lab is not translated
// and fails with ENETUNREACH (the client namespace has no route there)
// instead of reaching the Service's pods. The node's own address (from its
// Node object) and an address inside --external-ip-cidrs are captured.
func TestExternalIPHijackRefused(t *testing.T) {
	const hijacked, nodeAddr, allowed = "192.168.61.5", "192.168.50.10", "192.168.60.5"
	e := startWith(t, threePods, map[string]string{
		"node.yaml": nodeYAML("node-a", nodeAddr, "zone-a"),
		"svc.yaml": svcSpec{name: "grab", clusterIPs: []string{vip},
			externalIPs: []string{hijacked, nodeAddr, allowed}}.yaml(allReady("node-a")...),
	}, "--external-ip-cidrs", "192.168.60.0/24")
	out := e.waitInspect(10*time.Second, nodeAddr+":80/TCP", allowed+":80/TCP", "10.244.1.13:8080")
	if strings.Contains(out, hijacked) {
		t.Fatalf("%s is programmed though it is no address of this node:\n%s", hijacked, out)
	}
	for _, addr := range []string{nodeAddr + ":80", allowed + ":80"} {
		if res := tcpN(t, e, e.client(), addr, 10); res.OK != 10 {
			t.Errorf("%s: replies %v errors %v, want 10 answers", addr, res.Replies, res.Errors)
		}
	}
	if res := tcpN(t, e, e.client(), hijacked+":80", 5); res.Errors["ENETUNREACH"] != 5 {
		t.Errorf("%s: replies %v errors %v, want 5 ENETUNREACH (not translated)", hijacked, res.Replies, res.Errors)
	}
	if log := e.agentLog(); !strings.Contains(log, `spec.externalIPs[0] \"`+hijacked+`\" is refused`) {
		t.Errorf("the agent did not log the refused externalIP with its reason:\n%s", log)
	}
	if m := e.scrape(); !strings.Contains(m, "socklb_refused_external_ips 1\n") {
		t.Errorf("socklb_refused_external_ips is not 1:\n%s", testkit.GrepLines(m, "socklb_refused_external_ips"))
	}
}
