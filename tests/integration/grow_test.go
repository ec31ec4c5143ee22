package integration

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/socklb/socklb/internal/testkit"
)

// TestMapsGrowUnderLoad: Services that need more room than --max-services
// and --max-backends give (4 and 8 here: Service a alone fits) make the
// agent grow its maps within --map-memory-budget, under a connect loop to
// a: no connect fails, every Service answers on all its pods afterwards,
// nothing is refused, the maps hold the grown sizes in a new generation,
// and a restart with the same flags keeps them.
func TestMapsGrowUnderLoad(t *testing.T) {
	flags := []string{"--max-services", "4", "--max-backends", "8", "--map-memory-budget", "64Mi"}
	e := startWith(t, threePods, map[string]string{
		"a.yaml": svcSpec{name: "a", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
	}, flags...)
	gen := waitGeneration(t, e, served{})
	bg := startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
	baseline := servedIn(e.served, window)

	// 4 Services of 2 frontends and 3 backends each: 8 and 24, against 4
	// and 8.
	vips := []string{vip, "10.96.0.40", "10.96.0.41", "10.96.0.42"}
	for i, ip := range vips[1:] {
		name := string(rune('b' + i))
		e.writeManifest(name+".yaml", svcSpec{name: name, clusterIPs: []string{ip}}.yaml(allReady("node-a")...))
	}
	grew := e.waitLog(liveness, regexp.MustCompile(`"the maps grew: the Services need more room" frontends=([0-9]+) backends=([0-9]+)`))
	if grew == nil {
		t.Fatalf("the maps did not grow:\n%s", e.agentLog())
	}
	if grew[1] != "16" || grew[2] != "32" {
		t.Errorf("grown to %s frontends and %s backends, want 16 and 32 (powers of two with room for 8 and 24)", grew[1], grew[2])
	}
	next := waitGeneration(t, e, gen)
	checkShare(t, "after growing", servedIn(e.served, window), baseline)
	res := stopLoop(t, bg, "the growth")
	t.Logf("%d connects across the growth (generation %s -> %s), errors %v", res.OK, filepath.Base(gen.gen), filepath.Base(next.gen), res.Errors)
	if res.TotalErrors() != 0 {
		t.Fatalf("%d connects failed while the maps grew: %v (%s)\n%s", res.TotalErrors(), res.Errors, res.FirstError, e.agentLog())
	}
	for _, ip := range vips {
		if !eventually(liveness, func() bool { return strings.Contains(e.inspect(), ip+":80/TCP") }) {
			t.Fatalf("%s:80 not programmed after the growth:\n%s", ip, e.inspect())
		}
		if r := tcpN(t, e, e.client(), ip+":80", 30); r.OK != 30 || len(r.Replies) != 3 {
			t.Errorf("%s:80 after the growth answered %d of 30 over %v, want all, over the 3 pods (errors %v)", ip, r.OK, r.Replies, r.Errors)
		}
	}
	if strings.Contains(e.agentLog(), "Service not programmed") || strings.Contains(e.agentLog(), "frontend not programmed") {
		t.Errorf("a Service was refused or failed although the budget allowed the growth:\n%s", e.agentLog())
	}
	if _, ok := testkit.Sample(e.scrape(), "socklb_refused_services"); ok {
		t.Error("socklb_refused_services has a series after the growth")
	}

	// Restarted with the same flags, the agent keeps the grown maps.
	e.stopAgent(syscall.SIGTERM)
	e.startAgentBin(socklbBin, flags...)
	after := waitGeneration(t, e, served{})
	if after.gen != next.gen {
		t.Errorf("restarted with the same flags, the maps moved from %s to %s", filepath.Base(next.gen), filepath.Base(after.gen))
	}
	if e.waitLog(liveness, regexp.MustCompile(`"first sync"`)) == nil || strings.Contains(e.agentLog(), "the maps grew") {
		t.Errorf("the restarted agent did not sync, or grew its maps again:\n%s", e.agentLog())
	}
	if r := tcpN(t, e, e.client(), vips[3]+":80", 10); r.OK != 10 {
		t.Errorf("after the restart %s:80 answered %d of 10 (errors %v)", vips[3], r.OK, r.Errors)
	}
}
