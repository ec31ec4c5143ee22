package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakePins struct {
	mu    sync.Mutex
	fixed []string
	err   error
}

func (f *fakePins) RepairPins() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fixed := f.fixed
	f.fixed = nil
	return fixed, f.err
}

func (f *fakePins) set(fixed []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fixed, f.err = fixed, err
}

// TestWatchPins: repaired pins are counted; pins that cannot be trusted
// fail /healthz (the agent is not serving what it believes) but not
// /livez, until a check finds them whole again.
func TestWatchPins(t *testing.T) {
	pins := &fakePins{}
	a, err := New(Config{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Datapath: nopApplier{}, HealthTimeout: time.Minute,
		Pins: pins, PinCheckInterval: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.watchPins(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	code := func(path string) int {
		rec := httptest.NewRecorder()
		a.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s", what)
			}
		}
	}
	pins.set([]string{"/sys/fs/bpf/socklb/links/connect4"}, nil)
	waitFor("repair counted", func() bool { return testutil.ToFloat64(a.metrics.pinsRepairedTotal) == 1 })
	if c := code("/healthz"); c != 200 {
		t.Errorf("/healthz %d after a successful repair, want 200", c)
	}
	pins.set(nil, errors.New("another agent pinned its own map"))
	waitFor("/healthz 503", func() bool { return code("/healthz") == 503 })
	if c := code("/livez"); c != 200 {
		t.Errorf("/livez %d while pins are broken, want 200: a restart would meet the same pins", c)
	}
	pins.set(nil, nil)
	waitFor("/healthz 200 again", func() bool { return code("/healthz") == 200 })
}
