package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

type fakeSource struct{ err error }

func (s fakeSource) Run(ctx context.Context, changed func()) error {
	if s.err != nil {
		return s.err
	}
	changed()
	<-ctx.Done()
	return nil
}

func (fakeSource) Snapshot() model.Input { return model.Input{NodeName: "node-a"} }

type fakeTracked struct{ fakeSource }

func (fakeTracked) Checkout() source.Changes { return source.Changes{} }
func (fakeTracked) Pending() (int, int)      { return 7, 0 }
func (fakeTracked) NodeInput() model.Input   { return model.Input{} }
func (fakeTracked) Nodes() []*corev1.Node    { return nil }
func (fakeTracked) ServiceObjects(types.NamespacedName) servicemap.ServiceObjects {
	return servicemap.ServiceObjects{}
}

// TestStartEarlyKeepsTracked: the agent's per-change sync needs Tracked;
// a source started early must not fall back to full snapshots.
func TestStartEarlyKeepsTracked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := source.StartEarly(ctx, fakeTracked{})
	tr, ok := s.(source.Tracked)
	if !ok {
		t.Fatalf("StartEarly(Tracked) returned %T, which is not Tracked", s)
	}
	if n, _ := tr.Pending(); n != 7 {
		t.Errorf("Pending() = %d, want the source's 7", n)
	}
	if _, ok := source.StartEarly(ctx, fakeSource{}).(source.Tracked); ok {
		t.Error("StartEarly of a plain Source claims to be Tracked")
	}
}

// TestStartEarlyRunReturnsSourceError: a source that cannot start
// watching fails Run as it did when Run started it, with its own error.
func TestStartEarlyRunReturnsSourceError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := errors.New("waiting for the informer caches to sync: forbidden")
	s := source.StartEarly(ctx, fakeSource{err: want})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func() {}) }()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("Run = %v, want %v", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return the source's error")
	}
}

// TestStartEarlyRecordsFirstChange: the first sync's log says when the
// caches synced, though that was before Run.
func TestStartEarlyRecordsFirstChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := time.Now()
	s := source.StartEarly(ctx, fakeSource{})
	fc := s.(source.FirstChanger)
	deadline := time.Now().Add(5 * time.Second)
	for fc.FirstChange().IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("FirstChange still zero after the source signalled its sync")
		}
		time.Sleep(time.Millisecond)
	}
	if fc.FirstChange().Before(before) {
		t.Errorf("FirstChange %s before StartEarly %s", fc.FirstChange(), before)
	}
}
