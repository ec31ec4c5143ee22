package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// Each optional kernel feature, forced off as on an older kernel: the agent
// loads, Services work, and it says (log and metric) what is lost.

// TestWithoutSetRetvalRefusesWithEPERM: before Linux 5.18 a cgroup
// sock_addr program cannot choose connect()'s errno; rejecting gives EPERM.
func TestWithoutSetRetvalRefusesWithEPERM(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"web.yaml":   svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
		"empty.yaml": svcSpec{name: "empty", clusterIPs: []string{"10.96.0.20"}}.yaml(),
	}, "--disable-kernel-features", "set_retval")
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.96.0.20:80/TCP")
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.OK != 10 {
		t.Fatalf("a Service with endpoints: replies %v errors %v", res.Replies, res.Errors)
	}
	if res := tcpN(t, e, e.client(), "10.96.0.20:80", 3); res.Errors["EPERM"] != 3 {
		t.Fatalf("no endpoints without bpf_set_retval: replies %v errors %v, want EPERM", res.Replies, res.Errors)
	}
	if !strings.Contains(e.agentLog(), "refuses connections with EPERM") {
		t.Errorf("the agent did not warn about EPERM:\n%s", e.agentLog())
	}
	if m := e.scrape(); !strings.Contains(m, `socklb_kernel_feature_enabled{feature="set_retval"} 0`) ||
		!strings.Contains(m, `socklb_kernel_feature_enabled{feature="sock_destroy"} 1`) {
		t.Errorf("kernel feature metrics wrong:\n%s", testkit.GrepLines(m, "socklb_kernel_feature"))
	}
}

// TestWithoutSockDestroyServicesWork: before Linux 6.5 there is no
// bpf_sock_destroy; socket termination is off, Services work, the agent
// warns and the metric says so, and a removed backend leaves the Service
// (only its held sockets are not destroyed).
func TestWithoutSockDestroyServicesWork(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"web.yaml": svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
	}, "--disable-kernel-features", "sock_destroy")
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP")
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.OK != 10 {
		t.Fatalf("replies %v errors %v", res.Replies, res.Errors)
	}
	if !strings.Contains(e.agentLog(), "will not be destroyed") {
		t.Errorf("the agent did not warn that sockets will not be destroyed:\n%s", e.agentLog())
	}
	if m := e.scrape(); !strings.Contains(m, `socklb_kernel_feature_enabled{feature="sock_destroy"} 0`) ||
		!strings.Contains(m, `socklb_kernel_feature_enabled{feature="set_retval"} 1`) {
		t.Errorf("kernel feature metrics wrong:\n%s", testkit.GrepLines(m, "socklb_kernel_feature"))
	}
	// The sync that removes a backend would also destroy its sockets;
	// without the feature it must still remove it from the Service.
	e.writeManifest("web.yaml", svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a"), readyEP("10.244.1.12", "node-a")))
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := tcpN(t, e, e.client(), vip+":80", 30)
		if res.OK == 30 && res.Replies["pod3"] == 0 && res.Replies["pod1"] > 0 && res.Replies["pod2"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after pod3 left the Service: replies %v errors %v, want 30 on pod1 and pod2 only\nagent log:\n%s", res.Replies, res.Errors, e.agentLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if log := e.agentLog(); strings.Contains(log, "panic") || !strings.Contains(e.scrape(), "socklb_build_info{") {
		t.Errorf("the agent did not survive the backend's removal:\n%s", log)
	}
}
