package integration

import (
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

// TestRollbackToUnversionedAgent: the documented rollback (the DaemonSet's
// pod replaced by one running the previous image, with the same flags)
// from the current agent to the agent of unversionedCommit, under a
// connect loop from the lab's client namespace (no default route: an
// untranslated connect fails there with ENETUNREACH, never leaves the
// machine). The old agent neither refuses nor crashes: it finds no maps
// where it looks (<bpffs>/maps/<name>), creates empty ones, switches the
// pinned links to its programs and fills the maps on its first sync. What
// that costs is measured and bounded by the rollback itself: connects fail
// only between the current agent's SIGTERM and the old agent's readiness
// (its first sync done), and the loop, still running then, is served
// again (minShare of an equal window before the rollback). The versioned
// directory stays behind, and the next current agent removes it with no
// failed connect.
func TestRollbackToUnversionedAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, a cgroup and BPF pins (CI runs this as root)")
	}
	old := unversionedBin(t)
	e := startEcho(t)
	current := waitGeneration(t, e, served{})
	if _, err := lab.BuildLabclient(); err != nil {
		t.Fatal(err)
	}

	linksBefore := pinnedLinkIDs(t, e)

	bg := startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
	baseline := servedIn(e.served, window)
	// `kubectl rollout undo`: the kubelet stops the pod (SIGTERM) and
	// starts the previous image with the same arguments.
	stopped := time.Now()
	e.stopAgent(syscall.SIGTERM)
	e.startAgentBin(old)
	healthz, err := e.current().LoggedAddr("health", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := e.current().LoggedAddr("metrics", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// What `kubectl rollout status` waits for: the pod's readiness.
	if err := e.current().WaitReady(healthz, metrics, 10*time.Second); err != nil {
		t.Fatalf("the agent of %s did not become ready on the current agent's pins: %v", unversionedCommit, err)
	}
	ready := time.Now()
	checkShare(t, "after the rollback", servedIn(e.served, window), baseline)
	res := stopLoop(t, bg, "the rollback")
	gap, err := time.ParseDuration(res.LongestGap)
	if err != nil {
		t.Fatalf("labclient's longest gap %q: %v", res.LongestGap, err)
	}
	t.Logf("rollback to %s: %d connects, %d failed %v, longest gap between two served connects %s; SIGTERM to ready %s",
		unversionedCommit, res.Attempts, res.TotalErrors(), res.Errors, gap.Round(time.Millisecond), ready.Sub(stopped).Round(time.Millisecond))
	for errno := range res.Errors {
		if errno != "ENETUNREACH" {
			t.Errorf("connects failed with %s (%s): a rollback should only leave ClusterIPs untranslated (ENETUNREACH here)", errno, res.FirstError)
		}
	}
	// The outage lies within the rollback: whatever failed the first
	// failed connect happened after the SIGTERM, and the last failed
	// connect began before the old agent was ready.
	if res.TotalErrors() > 0 {
		from, err1 := time.Parse(time.RFC3339Nano, res.FailedFrom)
		until, err2 := time.Parse(time.RFC3339Nano, res.FailedUntil)
		if err1 != nil || err2 != nil {
			t.Fatalf("labclient's failure times %q, %q: %v %v", res.FailedFrom, res.FailedUntil, err1, err2)
		}
		if from.Before(stopped) {
			t.Errorf("a connect failed %s before the current agent was stopped: the outage is not the rollback's", stopped.Sub(from).Round(time.Millisecond))
		}
		if until.After(ready) {
			t.Errorf("connects still failed %s after the agent of %s was ready (its first sync done): the ClusterIP stayed untranslated past the rollback (%d failed connects); docs/upgrade.md promises it ends with that sync",
				until.Sub(ready).Round(time.Millisecond), unversionedCommit, res.TotalErrors())
		}
	}

	// What the old agent did with the pins: its own maps straight under
	// maps/, the links kept (switched to its programs, not re-attached:
	// the current agent leaves them pinned when it stops, so the cgroup is
	// never without a hook) and the current agent's directory left behind,
	// which its `cleanup` does not know.
	if after := pinnedLinkIDs(t, e); !maps.Equal(after, linksBefore) {
		t.Errorf("pinned links before the rollback %v, after %v: the old agent attached new links instead of switching the current agent's", linksBefore, after)
	}
	legacy := filepath.Join(e.fs.Path(), "maps")
	if _, err := os.Stat(filepath.Join(legacy, "services")); err != nil {
		t.Errorf("the agent of %s did not pin its own maps under %s: %v", unversionedCommit, legacy, err)
	}
	if _, err := os.Stat(current.gen); err != nil {
		t.Errorf("the current agent's %s is gone after the rollback (docs/upgrade-maps.md says it stays): %v", current.gen, err)
	}
	progs := map[int]bool{}
	links, _ := os.ReadDir(filepath.Join(e.fs.Path(), "links"))
	for _, l := range links {
		var li struct {
			ProgID int `json:"prog_id"`
		}
		if err := bpftoolJSON(&li, "link", "show", "pinned", filepath.Join(e.fs.Path(), "links", l.Name())); err != nil {
			t.Fatal(err)
		}
		// The egress hook is newer than the agent rolled back to, which
		// leaves it alone: it keeps the current agent's program, which
		// checks only sockets flagged in the current maps' sk_state
		// (docs/upgrade.md). The next upgrade switches it again, or
		// detaches it. (Here no Service has source ranges, so it is
		// attached only if that changes.)
		// sock_release too is newer: it keeps deleting closed sockets'
		// entries from the current maps' sock_conns, which the old
		// agent's hooks never read.
		if l.Name() == "egress" || l.Name() == "sock_release" {
			if !current.progs[li.ProgID] {
				t.Errorf("link egress runs program %d, not the current agent's", li.ProgID)
			}
			continue
		}
		if current.progs[li.ProgID] {
			t.Errorf("link %s still runs program %d of the current agent", l.Name(), li.ProgID)
		}
		progs[li.ProgID] = true
	}
	if len(links) != len(linksBefore) {
		t.Errorf("%d links pinned after the rollback, want the %d before: the old agent's 8, the current agent's sock_release and its egress if it had one", len(links), len(linksBefore))
	}

	// Upgrading again removes what the rollback left: the next current
	// agent migrates the old agent's maps and unpins the stale directory,
	// with no failed connect.
	upgradeFromUnderLoad(t, e, served{gen: legacy, progs: progs}, []upgradeStep{{name: "upgrade after the rollback", bin: socklbBin}})
}

// pinnedLinkIDs maps each pinned link's name to its kernel link id.
func pinnedLinkIDs(t *testing.T, e *env) map[string]int {
	t.Helper()
	ids := map[string]int{}
	links, err := os.ReadDir(filepath.Join(e.fs.Path(), "links"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		var li struct {
			ID int `json:"id"`
		}
		if err := bpftoolJSON(&li, "link", "show", "pinned", filepath.Join(e.fs.Path(), "links", l.Name())); err != nil {
			t.Fatal(err)
		}
		ids[l.Name()] = li.ID
	}
	return ids
}
