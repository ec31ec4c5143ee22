package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

// TestRestartUnderLoad: kill -9 of the agent while a client connects in a
// loop, then a restart, costs no connection: the pinned links and maps
// keep serving while no agent runs, and the new agent adopts them (all 4
// frontends, read back from the maps) and goes on programming: a change
// made after the restart reaches the datapath under the same load. The
// loop runs until all that is done, and keeps being served: the window
// with no agent and the window after the change each serve at least
// minShare of the connects of an equal window before the kill.
func TestRestartUnderLoad(t *testing.T) {
	e := startEcho(t)
	bg := startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
	baseline := servedIn(e.served, window)
	e.stopAgent(syscall.SIGKILL)
	checkShare(t, "no agent running", servedIn(e.served, window), baseline)
	restart := time.Now()
	e.startAgent()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.agentLog(), `"datapath ready"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the new agent did not come up:\n%s", e.agentLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(e.agentLog(), "adopted_frontends=4") {
		t.Fatalf("the new agent did not adopt the 4 pinned frontends:\n%s", e.agentLog())
	}
	t.Logf("new agent adopted the pinned state %s after start", time.Since(restart))
	// Under the same load, the new agent programs a change.
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.12")...))
	deadline = time.Now().Add(10 * time.Second)
	for strings.Contains(e.inspect(), "10.244.1.11:8080") {
		if time.Now().After(deadline) {
			t.Fatalf("the new agent did not apply a change within 10 s:\n%s", e.agentLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkShare(t, "after the restart and the change", servedIn(e.served, window), baseline)
	res := stopLoop(t, bg, "the restart and the change")
	t.Logf("%d connects across kill -9, restart and a change, errors %v", res.OK, res.Errors)
	if res.TotalErrors() != 0 {
		t.Fatalf("%d connects failed across the restart: %v (%s)", res.TotalErrors(), res.Errors, res.FirstError)
	}
	select {
	case <-e.current().Exited():
		t.Fatalf("the new agent exited:\n%s", e.agentLog())
	default:
	}
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.Replies["pod2"] != 10 {
		t.Fatalf("after the change: %v %v, want all on pod2", res.Replies, res.Errors)
	}
}

// TestChurnUnderLoad scales a Service 1 -> 20 -> 1 -> 7 -> 2 -> 0 -> 20 -> 3
// while a client connects in a loop. Each change gets its own loop, so a
// failure is charged to the change it happened in: a change between two
// non-empty backend sets fails nothing; the changes into and out of the 0
// phase fail only with ECONNREFUSED (REJECT), and the change into it at
// least once. After a shrink is applied, the removed pods get nothing for
// 250 ms while the loop still runs and the remaining pods answer. Each
// loop runs until its change is applied and checked, and into a non-empty
// set until the new set has served it 10 connects a pod, however long
// that takes.
func TestChurnUnderLoad(t *testing.T) {
	var pods []lab.PodSpec
	var all []ep
	for i := 1; i <= 20; i++ {
		ip := fmt.Sprintf("10.244.2.%d", i)
		pods = append(pods, lab.PodSpec{Name: fmt.Sprintf("p%d", i), IP: ip})
		all = append(all, readyEP(ip, "node-a"))
	}
	svc := svcSpec{name: "churn", clusterIPs: []string{vip}}
	e := startWith(t, pods, map[string]string{"svc.yaml": svc.yaml(all[:1]...)})
	e.waitInspect(10*time.Second, "10.244.2.1:8080")

	total := 0
	cur := 1
	for _, n := range []int{20, 1, 7, 2, 0, 20, 3} {
		what := fmt.Sprintf("%d -> %d", cur, n)
		var bg *lab.Background
		if cur > 0 {
			bg = startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
		} else {
			// Nothing to serve the loop yet: it is refused until the
			// change, which serves it (waitServed below).
			var err error
			if bg, err = e.client().StartLoop(e.ctx(), e.cg, vip+":80"); err != nil {
				t.Fatal(err)
			}
		}
		e.writeManifest("svc.yaml", svc.yaml(all[:n]...))
		if n == 0 {
			e.waitInspect(10*time.Second, "no endpoints: REJECT")
		} else {
			e.waitInspect(10*time.Second, fmt.Sprintf("10.244.2.%d:8080", n))
		}
		if n < cur {
			gone := fmt.Sprintf("10.244.2.%d:8080", n+1)
			deadline := time.Now().Add(10 * time.Second)
			for strings.Contains(e.inspect(), gone) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s still programmed 10 s after the shrink", what, gone)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n > 0 {
				// The loop's connect in flight may have been translated
				// before the change; once another is served, every later
				// one was translated after it (one connect at a time).
				waitServed(t, bg, e.served, e.served(), what)
			}
			before := e.lab.Counts("tcp")
			time.Sleep(250 * time.Millisecond)
			after := e.lab.Counts("tcp")
			if !bg.Running() {
				t.Fatalf("%s: the connect loop ended before the removed pods' window did: the check would hold nothing", what)
			}
			var kept int64
			for i := 1; i <= 20; i++ {
				name := fmt.Sprintf("p%d", i)
				d := after[name] - before[name]
				if i > n && d != 0 {
					t.Errorf("%s: %s got %d connections after its removal was applied", what, name, d)
				}
				if i <= n {
					kept += d
				}
			}
			if n > 0 && kept == 0 {
				t.Errorf("%s: the remaining pods got nothing in the window: the loop was not connecting", what)
			}
		}
		if n > 0 {
			// The loop outlives the change: the new set serves it, 10
			// connects a pod (a count, not a time: the 20-pod sets must
			// spread for the check after the loop).
			waitServed(t, bg, e.served, e.served()+int64(10*n)-1, what)
		}
		o := stopLoop(t, bg, what)
		total += o.OK
		refused := o.Errors["ECONNREFUSED"]
		switch {
		case cur > 0 && n > 0 && o.TotalErrors() != 0:
			t.Errorf("%s: %d connects failed between two non-empty backend sets: %v (%s)", what, o.TotalErrors(), o.Errors, o.FirstError)
		case o.TotalErrors() != refused:
			t.Errorf("%s: connects failed other than by REJECT: %v (%s)", what, o.Errors, o.FirstError)
		case n == 0 && refused == 0:
			t.Errorf("%s: no ECONNREFUSED once the Service had no endpoints", what)
		}
		if n > 0 && o.OK == 0 {
			t.Errorf("%s: no connect succeeded", what)
		}
		cur = n
	}
	t.Logf("%d connects across 7 backend-set changes", total)
	spread := 0
	for _, c := range e.lab.Counts("tcp") {
		if c > 0 {
			spread++
		}
	}
	if spread < 15 {
		t.Errorf("only %d of 20 pods got traffic while 20 were in the Service", spread)
	}
}

// TestFullMapsRefuseTheNewestService: with --max-backends too small for
// every Service, the agent refuses the newest Service whole instead of
// failing whichever frontend a full map happens to meet: a and b (2
// frontends of 3 backends each) need 12 backends, 9 fit; created at the
// same time, namespace/name decides, so b is refused. It is named in the
// log with the flag to raise and in socklb_refused_services, /healthz
// stays 200 past --healthz-timeout, a answers on all its pods over TCP and
// UDP, and both of b's frontends stay untranslated.
func TestFullMapsRefuseTheNewestService(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"a.yaml": svcSpec{name: "a", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
		"b.yaml": svcSpec{name: "b", clusterIPs: []string{"10.96.0.40"}}.yaml(allReady("node-a")...),
	}, "--max-backends", "9", "--map-memory-budget", "0", "--healthz-timeout", "1s")
	refused := e.waitLog(10*time.Second, regexp.MustCompile(`"Service not programmed: the maps have no room for it" service="([^"]+)" .*reason="([^"]+)"`))
	if refused == nil {
		t.Fatalf("no log line naming a refused Service:\n%s", e.agentLog())
	}
	if refused[1] != "default/b" || !strings.Contains(refused[2], "--max-backends") {
		t.Errorf("refused %s (%s), want default/b and the flag --max-backends", refused[1], refused[2])
	}
	if strings.Contains(e.agentLog(), "frontend not programmed") {
		t.Errorf("a frontend failed to program; what does not fit must be refused before it is written:\n%s", e.agentLog())
	}
	if v, ok := testkit.Sample(e.scrape(), `socklb_refused_services{service="default/b"}`); !ok || v != 2 {
		t.Errorf("socklb_refused_services for default/b is %v (present %v), want its 2 frontends", v, ok)
	}
	time.Sleep(1500 * time.Millisecond) // past --healthz-timeout
	if c := e.healthCode("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz %d with a Service refused for room; a refusal must not make the node unready", c)
	}
	out := e.inspect()
	for _, fe := range []string{vip + ":80/TCP", vip + ":53/UDP", "10.96.0.40:80/TCP", "10.96.0.40:53/UDP"} {
		addr, proto, _ := strings.Cut(fe, "/")
		var res *lab.Result
		var err error
		if proto == "TCP" {
			res, err = e.client().TCP(e.ctx(), e.cg, addr, 30)
		} else {
			// A socket per query: one unconnected socket keeps one
			// backend per Service port, so it would not show the spread.
			res, err = e.client().RunResult(e.ctx(), e.cg, "udp-connected", "--addr", addr, "--count", "30", "--reconnect")
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(fe, "10.96.0.40:") {
			if strings.Contains(out, fe) || res.Errors["ENETUNREACH"] == 0 || res.OK != 0 {
				t.Errorf("%s belongs to the refused Service but is programmed or answers: %v %v\n%s", fe, res.Replies, res.Errors, out)
			}
			continue
		}
		if res.OK != 30 || len(res.Replies) != 3 {
			t.Errorf("%s fits but answers %d of 30 (replies %v errors %v), want all, over the 3 pods\n%s", fe, res.OK, res.Replies, res.Errors, out)
		}
	}
}

// TestPinsArePrivate: pins are 0600 and their directories 0700.
func TestPinsArePrivate(t *testing.T) {
	e := startEcho(t)
	err := filepath.Walk(e.fs.Path(), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %o, want %o", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
