package main

import (
	"fmt"
	"strings"
)

// The targets of issue #22, checked against one run's own figures, as
// issue #12's are: goals, not tests.

// targets22 lists issue #22's targets that a run of the harness measures,
// in the order. connect4 against an empty program is
// bench/HOOKCOST.md's measurement, not the harness's.
func targets22(res Results) []target {
	runs := res.Runs
	var out []target
	for _, n := range sizesOf(runs) {
		out = append(out, connect4At(res, n))
	}
	for _, n := range sizesOf(runs) {
		out = append(out, vsDirect(runs, fmt.Sprintf("connects/s ≥ 0.97× direct at N=%d", n), n, func(r Run) *float64 { return r.ConnectsPerS }))
	}
	for _, n := range sizesOf(runs) {
		out = append(out, vsDirect(runs, fmt.Sprintf("UDP req/s ≥ 0.97× direct at N=%d", n), n, func(r Run) *float64 { return r.UDPRRPerS }))
	}
	agentP99 := atN(runs, "socklb's own programming latency p99 ≤ 2 ms at N=100 000", 100000, func(r Run) *float64 { return r.AgentLatencyP99ms }, 2, "ms")
	if r, ok := find(runs, 100000, "socklb"); ok && r.AgentLatencyChanges != nil {
		agentP99.measured += fmt.Sprintf(" (%d changes)", *r.AgentLatencyChanges)
	}
	out = append(out, agentP99, endToEnd(runs, 100000),
		atN(runs, "socklb's own part of the full sync ≤ 0.5 s at N=10 000", 10000, func(r Run) *float64 { return r.AgentFullSyncS }, 0.5, "s"),
		atN(runs, "socklb's own part of the full sync ≤ 5 s at N=100 000", 100000, func(r Run) *float64 { return r.AgentFullSyncS }, 5, "s"),
		rssAt(runs, 100000), mapMemAt(res, 100000))
	for _, c := range res.Capacity {
		out = append(out, capacityTarget(c))
	}
	return out
}

// connect4At is connect4's cost per call in the run's hook round at n
// (bpf_stats), against 800 ns.
func connect4At(res Results, n int) target {
	t := target{what: fmt.Sprintf("connect4 ≤ 800 ns per call at N=%d (bpf_stats)", n), measured: "–", status: statusAbsent}
	for _, h := range res.HookCost {
		c, ok := h.Hooks["connect4"]
		if h.NServices != n || !ok || c.NSPerCall == nil {
			continue
		}
		t.measured, t.status = fmt.Sprintf("%s ns (%d calls)", format(*c.NSPerCall), c.RunCount), statusMissed
		if *c.NSPerCall <= 800 {
			t.status = statusMet
		}
	}
	return t
}

// endToEnd is socklb's programming latency p99 against the harness's own
// watch of the same changes: within 3 ms.
func endToEnd(runs []Run, n int) target {
	t := target{what: fmt.Sprintf("end-to-end p99 within 3 ms of the API server's watch p99 at N=%d", n), measured: "–", status: statusAbsent}
	r, ok := find(runs, n, "socklb")
	if !ok {
		return t
	}
	if r.ProgLatencyP99ms == nil || r.WatchLatencyP99ms == nil {
		t.measured, t.status = "no figure: "+orDash(r.Note), statusMissed
		return t
	}
	d := *r.ProgLatencyP99ms - *r.WatchLatencyP99ms
	t.measured, t.status = fmt.Sprintf("%s ms - %s ms = %s ms", format(*r.ProgLatencyP99ms), format(*r.WatchLatencyP99ms), format(d)), statusMissed
	if d <= 3 {
		t.status = statusMet
	}
	return t
}

func rssAt(runs []Run, n int) target {
	t := atN(runs, fmt.Sprintf("agent RSS ≤ 400 MiB at N=%d (peak reported)", n), n, func(r Run) *float64 { return r.AgentRSSMiB }, 400, "MiB")
	if r, ok := find(runs, n, "socklb"); ok && r.AgentPeakRSSMiB != nil {
		t.measured += fmt.Sprintf(" (peak %s MiB)", format(*r.AgentPeakRSSMiB))
	}
	return t
}

func mapMemAt(res Results, n int) target {
	t := target{what: fmt.Sprintf("BPF map memory ≤ 600 MiB at N=%d", n), measured: "–", status: statusAbsent}
	for _, m := range res.SocklbMaps {
		if m.NServices != n {
			continue
		}
		t.measured, t.status = format(m.TotalMiB)+" MiB", statusMissed
		if m.TotalMiB <= 600 {
			t.status = statusMet
		}
	}
	return t
}

// capacityTarget is the capacity case: every Service programmed, none
// refused, and the NodePort answering at every Node address.
func capacityTarget(c Capacity) target {
	t := target{what: fmt.Sprintf("%d Services × %d endpoints × %d ports, %d NodePorts on %d Node addresses, fit the default maps",
		c.NServices, c.EndpointsPerService, c.Ports, c.NodePortServices, len(c.NodeAddresses))}
	answered := 0
	for _, a := range c.NodeAddresses {
		if c.NodePortAnswers[a] == c.NodePortTries {
			answered++
		}
	}
	t.measured = fmt.Sprintf("%d of %d frontends and %d of %d slots programmed, %d Services refused, NodePort answered at %d of %d addresses",
		c.FrontendsProgrammed, c.Frontends, c.SlotsProgrammed, c.Slots, c.RefusedServices, answered, len(c.NodeAddresses))
	if c.Note != "" {
		t.measured += "; " + c.Note
	}
	t.status = statusMissed
	if c.Note == "" && c.RefusedServices == 0 && c.FrontendsProgrammed == c.Frontends && c.SlotsProgrammed == c.Slots && answered == len(c.NodeAddresses) {
		t.status = statusMet
	}
	return t
}

func writeTargets22(w *strings.Builder, res Results) {
	fmt.Fprintf(w, "| target | measured | |\n|---|---|---|\n")
	for _, t := range targets22(res) {
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.what, t.measured, t.status)
	}
}

// has22 says whether the run's harness measured #22's figures (socklb's
// own part of the full sync, or the capacity case): older runs would only
// list them as absent.
func has22(res Results) bool {
	for _, r := range res.Runs {
		if r.Dataplane == "socklb" && r.AgentFullSyncS != nil {
			return true
		}
	}
	return len(res.Capacity) > 0
}
