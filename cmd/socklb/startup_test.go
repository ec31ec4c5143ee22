package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// listingSource is a source whose Run says when it started listing, then
// signals its caches synced.
type listingSource struct {
	listing chan struct{}
}

func (s *listingSource) Run(ctx context.Context, changed func()) error {
	close(s.listing)
	changed()
	<-ctx.Done()
	return nil
}

func (s *listingSource) Snapshot() model.Input { return model.Input{} }

// TestSourceListsWhileDatapathLoads: the datapath's load runs while the
// informers list, not before them. The fake load finishes only once the
// source has started; started after the load, the source never would, and
// the load times out. The agent's Run then gets the caches' sync signalled
// before it.
func TestSourceListsWhileDatapathLoads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &listingSource{listing: make(chan struct{})}
	early, dp, err := openBeside(ctx, src, func() (string, error) {
		select {
		case <-src.listing:
			return "datapath", nil
		case <-time.After(5 * time.Second):
			return "", errors.New("the datapath's load ended before the source started listing: the start is sequential")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if dp != "datapath" {
		t.Fatalf("openBeside returned %q, want open's value", dp)
	}
	changed := make(chan struct{}, 1)
	go func() { _ = early.Run(ctx, func() { changed <- struct{}{} }) }()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("Run never delivered the change the source signalled before it (caches synced)")
	}
}

// TestLateReportDeliversHeldProblems: problems the source finds while the
// datapath loads reach the agent, in order, once it exists.
func TestLateReportDeliversHeldProblems(t *testing.T) {
	p := func(name string) model.Problem {
		return model.Problem{Kind: model.KindWatch, Object: types.NamespacedName{Name: name}, Reason: "forbidden"}
	}
	var r lateReport
	r.report(p("services"))
	r.report(p("endpointslices"))
	var got []string
	r.deliver(func(p model.Problem) { got = append(got, p.Object.Name) })
	r.report(p("nodes"))
	want := []string{"services", "endpointslices", "nodes"}
	if len(got) != len(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered %v, want %v", got, want)
		}
	}
}
