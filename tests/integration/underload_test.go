package integration

import (
	"context"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

// Tests under load run a client that connects in a loop while something
// happens to the agent or to a Service: a kill, a restart, an upgrade, a
// rollback, an edit. No check compares the loop with a figure of this
// machine's speed (so many connects, within so many seconds), which a busy
// 2-CPU machine does not keep. Instead:
//
//   - the loop outlives the event: it has no end of its own
//     (lab.Background), the test stops it only once the event is over and
//     checked, and it must still be running and serving then;
//   - the loop keeps loading the datapath: the connects served in a
//     window during or after the event are compared, as a share, with
//     those of an equal window just before it in the same test, which
//     the same load slows alike.

// window is the length of a baseline window and of every window compared
// with it: long enough to average out a busy machine's bursts.
const window = 2 * time.Second

// minShare is the least share of its baseline window's connects that a
// window during or after an event serves. It is low because a busy
// machine's load comes and goes: with 8 busy loops beside the tests on 2
// CPUs, a loop went between about 80 and 600 connects a second for a
// second or more at a time, and a 2 s window served from 0.15 to 3.6 times
// the one before it; an agent starting up (a Go binary loading and
// verifying BPF programs) takes CPU from the client and the servers too.
// A datapath that lost its hooks serves nothing, and one that leaves
// connects to a retransmit or a timeout, or a loop that stalled, a few
// connects against a baseline of hundreds or thousands.
const minShare = 0.05

// liveness bounds the waits for something that must happen (a loop's
// first connect, a connect after a change): how long before a test calls
// the thing broken rather than slow. It is no measure of speed, and no
// check depends on it.
const liveness = 30 * time.Second

// served counts the connects accepted by the lab's pods, all together.
func (e *env) served() int64 { return sum(e.lab.Counts("tcp")) }

func sum(c map[string]int64) int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// startLoop starts a connect loop from c (in cg) to addr that runs until
// stopLoop, and returns once it serves: served, the pods' count, has
// grown. Stopping it later is then safe (labclient handles SIGTERM).
func startLoop(t *testing.T, ctx context.Context, c *lab.Client, cg *lab.Cgroup, addr string, served func() int64) *lab.Background {
	t.Helper()
	before := served()
	bg, err := c.StartLoop(ctx, cg, addr)
	if err != nil {
		t.Fatal(err)
	}
	waitServed(t, bg, served, before, "the connect loop's first connects")
	return bg
}

// waitServed waits until served has grown past from while bg runs: the
// loop is connecting, and succeeding.
func waitServed(t *testing.T, bg *lab.Background, served func() int64, from int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(liveness); served() <= from; time.Sleep(10 * time.Millisecond) {
		if !bg.Running() {
			res, err := bg.Stop()
			t.Fatalf("%s: the connect loop ended on its own before it served: %+v %v", what, res, err)
		}
		if time.Now().After(deadline) {
			res, err := bg.Stop()
			t.Fatalf("%s: nothing served in %s: %+v %v", what, liveness, res, err)
		}
	}
}

// servedIn counts the connects served during the next d.
func servedIn(served func() int64, d time.Duration) int64 {
	before := served()
	time.Sleep(d)
	return served() - before
}

// checkShare fails the test when a window served less than minShare of
// the connects of its baseline window.
func checkShare(t *testing.T, what string, got, baseline int64) {
	t.Helper()
	t.Logf("%s: %d connects served in %s, %.2f of the %d before", what, got, window, float64(got)/float64(max(baseline, 1)), baseline)
	if baseline == 0 {
		t.Fatalf("%s: the baseline window served nothing: the loop was not connecting", what)
	}
	if float64(got) < minShare*float64(baseline) {
		t.Errorf("%s: %d connects served in %s, under %.0f%% of the %d in the same window before: the datapath did not keep serving the loop",
			what, got, window, 100*minShare, baseline)
	}
}

// stopLoop stops a loop that must have outlived what it covered: it is
// still running when the test is done with it.
func stopLoop(t *testing.T, bg *lab.Background, what string) *lab.Result {
	t.Helper()
	if !bg.Running() {
		res, err := bg.Stop()
		t.Fatalf("the connect loop ended before %s was over and checked: it did not cover it (%+v %v)", what, res, err)
	}
	res, err := bg.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return res
}
