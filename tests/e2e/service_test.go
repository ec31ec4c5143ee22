package e2e

import (
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

var threePods = []lab.PodSpec{
	{Name: "echo-1", IP: "10.244.1.11"},
	{Name: "echo-2", IP: "10.244.1.12"},
	{Name: "echo-3", IP: "10.244.1.13"},
}

func backend(ip string) string { return ip + ":8080" }

// wantOnly checks that n connects were all answered, by exactly the pods
// named, each taking at least min of them.
func wantOnly(t *testing.T, res *lab.Result, n, min int, pods ...string) {
	t.Helper()
	t.Logf("replies %v errors %v", res.Replies, res.Errors)
	if res.OK != n {
		t.Fatalf("%d/%d connects answered; errors %v (%s)", res.OK, n, res.Errors, res.FirstError)
	}
	want := map[string]bool{}
	for _, p := range pods {
		want[p] = true
		if res.Replies[p] < min {
			t.Errorf("%s answered %d of %d connects, want at least %d", p, res.Replies[p], n, min)
		}
	}
	for p, c := range res.Replies {
		if !want[p] {
			t.Errorf("%s answered %d connects, but it is not a ready endpoint", p, c)
		}
	}
}

// TestServiceFollowsPods: a Service and Pods created through the API; the
// real EndpointSlice controller makes the slices; the client reaches every
// ready pod through the ClusterIP; scaling up and down moves the traffic;
// deleting the Service leaves the ClusterIP untranslated.
func TestServiceFollowsPods(t *testing.T) {
	e := newEnv(t, threePods...)
	e.startAgent()

	svc, at := e.createService("echo", "echo")
	vip := svc.Spec.ClusterIP
	tcpKey, udpKey := vip+":80/TCP", vip+":53/UDP"
	t.Logf("Service %s/echo has ClusterIP %s", e.ns, vip)
	e.waitBackends("Service created, no pods: REJECT frontend", tcpKey, nil, at)

	e.createPod("echo-1", "echo", "10.244.1.11", true)
	at = e.createPod("echo-2", "echo", "10.244.1.12", true)
	e.waitBackends("2 pods ready", tcpKey, []string{backend("10.244.1.11"), backend("10.244.1.12")}, at)

	// 200 connects over 2 pods, p = 1/2: 100 expected, sd 7.1; 50 is 7 sd out.
	res := e.tcp(vip+":80", 200)
	wantOnly(t, res, 200, 50, "echo-1", "echo-2")
	if res.Peer != vip+":80" {
		t.Errorf("getpeername = %q, want the ClusterIP %s:80", res.Peer, vip)
	}
	// The UDP port of the same Service: a DNS-style client.
	e.waitBackends("UDP port", udpKey, []string{"10.244.1.11:5353", "10.244.1.12:5353"}, time.Time{})
	if r := e.udp(vip+":53", 20); r.OK != 20 || len(r.Sources) != 1 || r.Sources[0] != vip+":53" {
		t.Errorf("UDP to %s:53: %d/20 answered from %v, errors %v", vip, r.OK, r.Sources, r.Errors)
	}

	// Scale up: a third pod becomes ready. The EndpointSlice controller's
	// trigger times have 1 s resolution, and the agent, as kube-proxy,
	// ignores those before its start: from here on they count.
	time.Sleep(time.Until(e.ready.Truncate(time.Second).Add(time.Second)))
	at = e.createPod("echo-3", "echo", "10.244.1.13", true)
	e.waitBackends("scale up to 3 pods", tcpKey, []string{backend("10.244.1.11"), backend("10.244.1.12"), backend("10.244.1.13")}, at)
	// 300 connects over 3 pods: 100 expected, sd 8.2; 50 is 6 sd out.
	wantOnly(t, e.tcp(vip+":80", 300), 300, 50, "echo-1", "echo-2", "echo-3")

	// A pod stops being ready: its endpoint goes, the pod stays.
	at = e.setPodStatus("echo-2", "10.244.1.12", false)
	e.waitBackends("pod not ready", tcpKey, []string{backend("10.244.1.11"), backend("10.244.1.13")}, at)
	wantOnly(t, e.tcp(vip+":80", 200), 200, 50, "echo-1", "echo-3")

	// Scale down: deleting a pod with a grace period makes it terminating
	// (ready=false, serving=true); with ready endpoints left, kube-proxy and
	// socklb use only those.
	at = e.deletePod("echo-1", 300)
	e.waitBackends("scale down (pod terminating)", tcpKey, []string{backend("10.244.1.13")}, at)
	wantOnly(t, e.tcp(vip+":80", 50), 50, 50, "echo-3")

	// The last ready pod terminates too: no ready endpoint is left, so
	// (KEP-1669) the serving-and-terminating ones take the traffic rather
	// than the Service refusing it. echo-2 is neither ready nor serving.
	at = e.deletePod("echo-3", 300)
	e.waitBackends("all pods terminating: serving ones used", tcpKey, []string{backend("10.244.1.11"), backend("10.244.1.13")}, at)
	wantOnly(t, e.tcp(vip+":80", 200), 200, 50, "echo-1", "echo-3")

	// The agent timed the changes from the EndpointSlice annotation, as
	// kube-proxy does.
	if n, ok := e.metric("socklb_network_programming_duration_seconds_count"); !ok || n < 1 {
		t.Errorf("socklb_network_programming_duration_seconds_count = %v (found %v), want >= 1", n, ok)
	} else {
		sum, _ := e.metric("socklb_network_programming_duration_seconds_sum")
		t.Logf("agent's socklb_network_programming_duration_seconds: %v samples, mean %.3fs "+
			"(the annotation has 1 s resolution, so this reads up to 1 s high)", n, sum/n)
	}

	// Delete the Service: the ClusterIP is no longer translated, and in a
	// namespace without a default route the connect fails ENETUNREACH.
	at = e.deleteService("echo")
	e.waitGone("Service deleted (TCP)", tcpKey, at)
	e.waitGone("Service deleted (UDP)", udpKey, at)
	if res := e.tcp(vip+":80", 5); res.Errors["ENETUNREACH"] != 5 {
		t.Errorf("connects to a deleted Service's ClusterIP gave %v, want 5 ENETUNREACH (untranslated)", res.Errors)
	}
}

// TestServiceWithoutReadyPods: kube-proxy REJECTs a Service with no usable
// endpoint; socklb fails the connect with ECONNREFUSED, whether the
// selector matches nothing or only pods that are not ready. When one gets
// ready, traffic flows.
func TestServiceWithoutReadyPods(t *testing.T) {
	e := newEnv(t, threePods[:1]...)
	e.startAgent()

	empty, at := e.createService("nobody", "nobody")
	e.waitBackends("Service selecting no pod", empty.Spec.ClusterIP+":80/TCP", nil, at)

	svc, _ := e.createService("starting", "starting")
	vip := svc.Spec.ClusterIP
	at = e.createPod("echo-1", "starting", "10.244.1.11", false)
	e.waitBackends("Service with an unready pod", vip+":80/TCP", nil, at)

	for _, ip := range []string{empty.Spec.ClusterIP, vip} {
		if res := e.tcp(ip+":80", 5); res.Errors["ECONNREFUSED"] != 5 {
			t.Errorf("connects to %s:80 (no ready endpoint) gave %v, want 5 ECONNREFUSED", ip, res.Errors)
		}
	}
	if res := e.udp(vip+":53", 3); res.Errors["ECONNREFUSED"] != 3 {
		t.Errorf("UDP to %s:53 (no ready endpoint) gave %v, want 3 ECONNREFUSED", vip, res.Errors)
	}

	at = e.setPodStatus("echo-1", "10.244.1.11", true)
	e.waitBackends("pod became ready", vip+":80/TCP", []string{backend("10.244.1.11")}, at)
	wantOnly(t, e.tcp(vip+":80", 20), 20, 20, "echo-1")
}
