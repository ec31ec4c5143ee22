package agent

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
)

// TestFirstSyncLogsPhases: the first sync, and only it, logs where the
// start went: the informers' lists (until the source's first changed()),
// the rebuild, the map writes, and the total since Run and since the
// process started.
func TestFirstSyncLogsPhases(t *testing.T) {
	h := startAgent(t)
	const applyTakes = 50 * time.Millisecond
	h.dp.delay = applyTakes
	h.src.set(func(in *model.Input) { in.Services = []*corev1.Service{service("web", "10.96.0.10")} })
	h.waitApply()
	h.settle()
	h.src.set(func(in *model.Input) {
		in.Services = append(in.Services, service("db", "10.96.0.11"))
	})
	h.waitApply()
	h.settle()

	lines := h.logs.lines(t, "first sync")
	if len(lines) != 1 {
		t.Fatalf("%d first sync lines after two syncs, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	dur := func(key string) time.Duration {
		v, ok := l[key].(float64)
		if !ok {
			t.Fatalf("first sync line has no duration %q: %v", key, l)
		}
		return time.Duration(v)
	}
	if l["frontends"] != float64(1) {
		t.Errorf("frontends = %v, want 1: %v", l["frontends"], l)
	}
	// startAgent backdates the start by a minute; the source became ready
	// when the test set its objects.
	listed, rebuild, apply, took := dur("informers_synced_after"), dur("rebuild_took"), dur("apply_took"), dur("took")
	if listed < time.Minute {
		t.Errorf("informers_synced_after = %s, want the minute before the source was ready", listed)
	}
	if apply < applyTakes || apply > 10*applyTakes {
		t.Errorf("apply_took = %s, want the Apply's %s", apply, applyTakes)
	}
	if rebuild <= 0 || rebuild >= applyTakes {
		t.Errorf("rebuild_took = %s, want the rebuild of one Service alone", rebuild)
	}
	if took < listed+rebuild+apply {
		t.Errorf("took = %s, less than its phases %s + %s + %s", took, listed, rebuild, apply)
	}
	if since := dur("since_process_start"); since < apply {
		t.Errorf("since_process_start = %s, shorter than the Apply", since)
	}
}

// TestFirstSyncReturnsMemory: the garbage of the first full sync is
// handed back to the kernel once, after that sync, and not by every later
// sync (a forced GC per change would cost what per-change sync saves).
func TestFirstSyncReturnsMemory(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	old := freeOSMemory
	freeOSMemory = func() { mu.Lock(); calls++; mu.Unlock() }
	t.Cleanup(func() { freeOSMemory = old })
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }

	h := startAgent(t)
	h.src.set(func(in *model.Input) { in.Services = []*corev1.Service{service("web", "10.96.0.10")} })
	h.waitApply()
	h.settle()
	if n := count(); n != 1 {
		t.Fatalf("memory returned %d times after the first sync, want once", n)
	}
	h.src.set(func(in *model.Input) { in.Services = append(in.Services, service("db", "10.96.0.11")) })
	h.waitApply()
	h.settle()
	if n := count(); n != 1 {
		t.Fatalf("memory returned %d times after a second sync, want only the first sync's", n)
	}
}
