package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

var threePods = []lab.PodSpec{
	{Name: "pod1", IP: "10.244.1.11"},
	{Name: "pod2", IP: "10.244.1.12"},
	{Name: "pod3", IP: "10.244.1.13"},
}

const vip = "10.96.0.10"

// startEcho programs Service default/echo over all three pods plus an empty
// Service, starts the agent and waits until both are in the maps.
func startEcho(t *testing.T) *env {
	e := newEnv(t, threePods...)
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
	e.writeManifest("empty.yaml", serviceYAML("empty", "10.96.0.20"))
	e.startAgent()
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.96.0.20:80/TCP", "10.244.1.13:8080")
	return e
}

// TestClusterIPSpreadsOverPods: 300 connects through the ClusterIP reach
// every pod about evenly. With p=1/3 each pod expects 100 (sd 8.2); the
// bound of 60 is 4.9 sd out, a chance failure about once in 10^6 runs.
func TestClusterIPSpreadsOverPods(t *testing.T) {
	e := startEcho(t)
	res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", 300)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replies %v errors %v", res.Replies, res.Errors)
	if res.OK != 300 {
		t.Fatalf("%d/300 connects answered; errors %v (%s)", res.OK, res.Errors, res.FirstError)
	}
	for _, p := range threePods {
		if n := res.Replies[p.Name]; n < 60 {
			t.Errorf("%s answered %d of 300 connects, want about 100", p.Name, n)
		}
		// The pods' own counters agree with what the client saw.
		if n := e.lab.Counts("tcp")[p.Name]; n != int64(res.Replies[p.Name]) {
			t.Errorf("%s's server counted %d connections, client saw %d", p.Name, n, res.Replies[p.Name])
		}
	}
	// The per-backend counters in the maps are iptables' pkts column.
	out := e.inspect()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ":8080") && strings.Contains(line, "connects 0 ") {
			t.Errorf("a backend shows no connects in inspect:\n%s", out)
		}
	}
}

func TestGetpeernameShowsClusterIP(t *testing.T) {
	e := startEcho(t)
	res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Peer != vip+":80" {
		t.Fatalf("TCP getpeername = %q, want %s:80", res.Peer, vip)
	}
	res, err = e.client().UDPConnected(e.ctx(), e.cg, vip+":53", 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 3 || res.Peer != vip+":53" {
		t.Fatalf("connected UDP: %d/3 answered, getpeername %q, want %s:53 (errors %v)", res.OK, res.Peer, vip, res.Errors)
	}
}

// TestUnconnectedUDPRepliesFromClusterIP is a DNS client: one unconnected
// socket, sendto the ClusterIP, recvfrom must report the ClusterIP, and the
// socket keeps one pod (Cilium keys this by socket cookie).
func TestUnconnectedUDPRepliesFromClusterIP(t *testing.T) {
	e := startEcho(t)
	res, err := e.client().UDP(e.ctx(), e.cg, vip+":53", 60)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 60 {
		t.Fatalf("%d/60 queries answered; errors %v", res.OK, res.Errors)
	}
	if len(res.Sources) != 1 || res.Sources[0] != vip+":53" {
		t.Fatalf("reply sources %v, want only %s:53", res.Sources, vip)
	}
	// One socket to one Service port is one conntrack flow under
	// kube-proxy: all its datagrams reach one pod. Sockets are spread: 10
	// all on one of 3 pods has probability 3^-9.
	if len(res.Replies) != 1 {
		t.Errorf("60 datagrams of one socket went to %v, want one pod", res.Replies)
	}
	pods := map[string]bool{}
	for i := 0; i < 10 && len(pods) < 2; i++ {
		r, err := e.client().UDP(e.ctx(), e.cg, vip+":53", 3)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK != 3 || len(r.Replies) != 1 {
			t.Fatalf("socket %d: replies %v errors %v, want 3 from one pod", i, r.Replies, r.Errors)
		}
		for name := range r.Replies {
			pods[name] = true
		}
	}
	if len(pods) < 2 {
		t.Errorf("10 sockets all went to %v: sockets are not spread", pods)
	}
}

func TestEmptyServiceRefuses(t *testing.T) {
	e := startEcho(t)
	res, err := e.client().TCP(e.ctx(), e.cg, "10.96.0.20:80", 5)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors["ECONNREFUSED"] != 5 {
		t.Fatalf("connects to a Service without endpoints gave %v, want 5 ECONNREFUSED", res.Errors)
	}
}

// TestNonServiceUntouched: an address that is no Service is not rewritten,
// so in a namespace without a default route it fails with ENETUNREACH.
func TestNonServiceUntouched(t *testing.T) {
	e := startEcho(t)
	for _, addr := range []string{"10.96.0.99:80", vip + ":81"} {
		res, err := e.client().TCP(e.ctx(), e.cg, addr, 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors["ENETUNREACH"] != 2 {
			t.Errorf("connect to %s gave %v, want ENETUNREACH (untranslated)", addr, res.Errors)
		}
	}
	// A pod IP is reached directly, untouched.
	res, err := e.client().TCP(e.ctx(), e.cg, "10.244.1.12:8080", 1)
	if err != nil || res.Replies["pod2"] != 1 {
		t.Fatalf("direct connect to pod2: %+v %v", res, err)
	}
}

// TestManifestEditMovesTraffic: an edit of the manifest moves a running
// connect loop's traffic to the new backend set as soon as the maps hold
// it: in a window after that, the loop, still running, is served by pod3
// alone, at least minShare of its rate in a window before the edit.
// Deleting the Service then removes the translation.
func TestManifestEditMovesTraffic(t *testing.T) {
	e := startEcho(t)
	bg := startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
	baseline := servedIn(e.served, window)
	start := time.Now()
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, endpoint{"10.244.1.11", false}, endpoint{"10.244.1.12", false}, endpoint{"10.244.1.13", true}))
	for strings.Contains(e.inspect(), "10.244.1.11:8080") {
		if time.Since(start) > liveness {
			t.Fatalf("the maps still hold pod1 %s after the manifest edit; inspect:\n%s\nagent log:\n%s", liveness, e.inspect(), e.agentLog())
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("the maps changed %s after the manifest edit (inotify, 50 ms debounce, sync)", time.Since(start))
	// The loop's connect in flight may have been translated before the
	// change; once another is served, every later one was translated
	// after it (one connect at a time).
	waitServed(t, bg, e.served, e.served(), "after the edit")
	before := e.lab.Counts("tcp")
	time.Sleep(window)
	after := e.lab.Counts("tcp")
	res := stopLoop(t, bg, "the edit")
	t.Logf("loop across the edit: %d connects by %v, errors %v", res.OK, res.Replies, res.Errors)
	for _, pod := range []string{"pod1", "pod2"} {
		if d := after[pod] - before[pod]; d != 0 {
			t.Errorf("%s got %d connects once the edit was in the maps: traffic did not move to pod3", pod, d)
		}
	}
	checkShare(t, "pod3 after the edit", after["pod3"]-before["pod3"], baseline)

	// Removing the Service removes the translation: once the maps no
	// longer hold it, a connect to the ClusterIP leaves untranslated.
	if err := exec.Command("rm", e.manifests+"/echo.yaml").Run(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(liveness)
	for strings.Contains(e.inspect(), vip+":80/TCP") {
		if time.Now().After(deadline) {
			t.Fatalf("the maps still hold %s:80 %s after its Service was deleted:\n%s", vip, liveness, e.inspect())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 1); res.Errors["ENETUNREACH"] != 1 {
		t.Fatalf("ClusterIP still translated once its Service left the maps: %+v", res)
	}
}

// TestClientOutsideCgroupUntouched: the hooks serve only the cgroup they
// are attached to, which is how the tests stay off the machine's traffic.
func TestClientOutsideCgroupUntouched(t *testing.T) {
	e := startEcho(t)
	res, err := e.client().TCP(e.ctx(), nil, vip+":80", 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors["ENETUNREACH"] != 2 {
		t.Fatalf("a client outside the cgroup got %v, want ENETUNREACH", res.Errors)
	}
}
