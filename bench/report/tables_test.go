package main

import (
	"strings"
	"testing"
)

// TestTableOnlyForMeasuredFigures: a figure no run of the page measured
// (the API watch latency, in runs from before the harness took it) gets no
// table, and one that was measured gets its table with the values.
func TestTableOnlyForMeasuredFigures(t *testing.T) {
	runs := []Run{
		{NServices: 100, Dataplane: "socklb", ProgLatencyP50ms: f(7.5)},
		{NServices: 1000, Dataplane: "socklb", ProgLatencyP50ms: f(8.25)},
	}
	sizes, dps := axes(runs)
	byTitle := map[string]metric{}
	for _, m := range metrics {
		byTitle[m.title] = m
	}
	var w strings.Builder
	table(&w, runs, sizes, dps, byTitle["API watch latency p50"])
	if w.Len() != 0 {
		t.Errorf("a table for a figure no run measured:\n%s", w.String())
	}
	table(&w, runs, sizes, dps, byTitle["Programming latency p50"])
	if !strings.Contains(w.String(), "| 1000 | 8.25 |") {
		t.Errorf("the measured figure's table lacks its value:\n%s", w.String())
	}
	runs[0].WatchLatencyP50ms = f(6.1)
	w.Reset()
	table(&w, runs, sizes, dps, byTitle["API watch latency p50"])
	if !strings.Contains(w.String(), "| 100 | 6.1 |") || !strings.Contains(w.String(), "| 1000 | – |") {
		t.Errorf("the watch latency's table:\n%s", w.String())
	}
}
