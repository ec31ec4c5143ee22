package integration

import (
	"encoding/json"
	"maps"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

// inspectConnects reads `socklb inspect -o json`'s connects per backend
// ("ip:port") of the frontend vip:port/TCP.
func inspectConnects(t *testing.T, e *env, port uint16) map[string]int {
	t.Helper()
	out, err := exec.Command(socklbBin, "inspect", "-o", "json", "--bpffs-path", e.fs.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("socklb inspect -o json: %v\n%s", err, out)
	}
	var svcs []datapath.ServiceDump
	if err := json.Unmarshal(out, &svcs); err != nil {
		t.Fatalf("decoding socklb inspect -o json: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, s := range svcs {
		k := s.Frontend.Key
		if k.Addr.String() != vip || k.Port != port || k.Proto != servicemap.TCP {
			continue
		}
		for _, b := range s.Backends {
			got[b.Backend.String()] = int(b.Connects)
		}
	}
	return got
}

// podAddr maps the lab's pod names to the backend addresses inspect prints.
func podAddr(pods []lab.PodSpec) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = p.IP + ":8080"
	}
	return out
}

// connectsMatch makes n connects through the ClusterIP and checks that
// inspect's per-backend connects grew by exactly what the client saw.
func connectsMatch(t *testing.T, e *env, n int, before map[string]int, want []string) map[string]int {
	t.Helper()
	res, err := e.client().TCP(e.ctx(), e.cg, vip+":80", n)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != n {
		t.Fatalf("%d/%d connects answered; errors %v (%s)", res.OK, n, res.Errors, res.FirstError)
	}
	addr := podAddr(threePods)
	got := inspectConnects(t, e, 80)
	out := e.inspect()
	for _, a := range want {
		if _, ok := got[a]; !ok {
			t.Fatalf("inspect shows no backend %s of %s:80/TCP:\n%s", a, vip, out)
		}
	}
	saw := map[string]int{}
	for name, k := range res.Replies {
		saw[addr[name]] = k
	}
	for a, now := range got {
		if now-before[a] != saw[a] {
			t.Errorf("backend %s: inspect counted %d connects (%d before, %d now), the client reached it %d times:\n%s", a, now-before[a], before[a], now, saw[a], out)
		}
	}
	return got
}

// TestStatsCountEveryConnectOfEndpointsArrivingOneByOne: the real agent
// and hooks, a Service whose pods become Ready one after the other (as
// TestPodToClusterIP's on the real node: no endpoint ready, then one, then
// two, the second sorting before the first), then each connect through the
// ClusterIP counts once in `socklb inspect` for the backend it reached,
// exactly as the client saw; a third backend added later leaves the
// survivors' counts alone, as does an agent restart: a backend keeps its
// counter while it stays a backend of that frontend.
func TestStatsCountEveryConnectOfEndpointsArrivingOneByOne(t *testing.T) {
	e := newEnv(t, threePods...)
	notReady := endpoint{ip: "10.244.1.11", ready: false}
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, endpoint{ip: "10.244.1.12", ready: false}, notReady))
	e.startAgent()
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "no endpoints")
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, endpoint{ip: "10.244.1.12", ready: true}, notReady))
	e.waitInspect(10*time.Second, "10.244.1.12:8080")
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.12", "10.244.1.11")...))
	e.waitInspect(10*time.Second, "10.244.1.11:8080")

	two := []string{"10.244.1.11:8080", "10.244.1.12:8080"}
	got := connectsMatch(t, e, 100, map[string]int{}, two)

	// A restarted agent adopts the maps: the counters go on.
	e.stopAgent(syscall.SIGTERM)
	e.startAgent()
	if _, err := e.current().LoggedAddr("metrics", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if again := inspectConnects(t, e, 80); !maps.Equal(again, got) {
		t.Errorf("connects %v before the agent restarted, %v after", got, again)
	}

	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
	out := e.waitInspect(10*time.Second, "10.244.1.13:8080")
	after := inspectConnects(t, e, 80)
	for _, a := range two {
		if after[a] != got[a] {
			t.Errorf("backend %s had %d connects, %d after a third backend was added:\n%s", a, got[a], after[a], out)
		}
	}
	connectsMatch(t, e, 60, after, append(two, "10.244.1.13:8080"))
}
