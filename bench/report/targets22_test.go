package main

import "testing"

// TestCapacityTarget: the capacity case is met only with every frontend
// and slot programmed, nothing refused and the NodePort answering at every
// Node address.
func TestCapacityTarget(t *testing.T) {
	ok := Capacity{NServices: 100000, Ports: 2, EndpointsPerService: 10, NodePortServices: 10000, NodeAddresses: []string{"a", "b"},
		Frontends: 10, FrontendsProgrammed: 10, Slots: 100, SlotsProgrammed: 100, NodePortAnswers: map[string]int{"a": 5, "b": 5}, NodePortTries: 5}
	if got := capacityTarget(ok); got.status != statusMet {
		t.Errorf("a case that fits: %+v", got)
	}
	for name, c := range map[string]Capacity{
		"refused":        func() Capacity { c := ok; c.RefusedServices = 1; return c }(),
		"unprogrammed":   func() Capacity { c := ok; c.FrontendsProgrammed = 9; return c }(),
		"slots":          func() Capacity { c := ok; c.SlotsProgrammed = 99; return c }(),
		"no answer at b": func() Capacity { c := ok; c.NodePortAnswers = map[string]int{"a": 5, "b": 4}; return c }(),
		"not synced":     func() Capacity { c := ok; c.Note = "not synced"; return c }(),
	} {
		if got := capacityTarget(c); got.status != statusMissed {
			t.Errorf("%s: %+v, want missed", name, got)
		}
	}
}

// TestEndToEndTarget: within 3 ms of the watch's p99 is met, more is not.
func TestEndToEndTarget(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		prog, watch float64
		want        string
	}{{31, 28.5, statusMet}, {32, 28.5, statusMissed}} {
		runs := []Run{{NServices: 100000, Dataplane: "socklb", ProgLatencyP99ms: f(c.prog), WatchLatencyP99ms: f(c.watch)}}
		if got := endToEnd(runs, 100000); got.status != c.want {
			t.Errorf("p99 %v against the watch's %v: %+v, want %s", c.prog, c.watch, got, c.want)
		}
	}
}
