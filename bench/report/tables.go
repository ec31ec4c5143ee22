package main

// The figure tables of one run's section.

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

var order = []string{"direct", "socklb", "iptables", "nftables"}

type metric struct {
	title, unit  string
	higherBetter bool
	get          func(Run) *float64
	note         string
}

var metrics = []metric{
	{"Connects per second", "connects/s", true, func(r Run) *float64 { return r.ConnectsPerS },
		"New TCP connections per second from one sequential client to one ClusterIP (connect, 1-byte exchange, close); median of the rounds."},
	{"Connect latency p50", "µs", false, func(r Run) *float64 { return r.ConnectP50us }, "Time spent in connect(), median round."},
	{"Connect latency p99", "µs", false, func(r Run) *float64 { return r.ConnectP99us }, ""},
	{"UDP request/response per second", "req/s", true, func(r Run) *float64 { return r.UDPRRPerS },
		"One unconnected UDP socket, sendto the ClusterIP and recvfrom the answer (the DNS pattern); median of the rounds."},
	{"Programming latency p50", "ms", false, func(r Run) *float64 { return r.ProgLatencyP50ms },
		"From the EndpointSlice write in the API server to the first connection through the ClusterIP that reaches the new endpoint."},
	{"Programming latency p99", "ms", false, func(r Run) *float64 { return r.ProgLatencyP99ms }, ""},
	{"API watch latency p50", "ms", false, func(r Run) *float64 { return r.WatchLatencyP50ms },
		"The same EndpointSlice writes, from the write to the event reaching the harness's own watch on the same machine: the API server's part of the programming latency, which no dataplane can remove. Its ratios compare the same watch while each dataplane ran beside it, not the dataplanes."},
	{"API watch latency p99", "ms", false, func(r Run) *float64 { return r.WatchLatencyP99ms }, ""},
	{"socklb's own latency p50", "ms", false, func(r Run) *float64 { return r.AgentLatencyP50ms },
		"socklb only: from a change's informer event to the maps holding it, per changed Service, over the programming-latency changes and the churn, with /metrics scraped every second (its histogram socklb_event_to_programmed_duration_seconds, estimated from the buckets as histogram_quantile does; not measured in older runs)."},
	{"socklb's own latency p99", "ms", false, func(r Run) *float64 { return r.AgentLatencyP99ms }, ""},
	{"Full sync", "s", false, func(r Run) *float64 { return r.FullSyncS },
		"From the dataplane's start to every Service programmed and the target answering through its ClusterIP."},
	{"socklb's own part of the full sync", "s", false, func(r Run) *float64 { return r.AgentFullSyncS },
		"socklb only: its full syncs once the informers' LIST was in, the rebuild and the map writes (socklb_sync_full_proxy_rules_duration_seconds_sum; the first sync alone unless the raw file's agent_full_syncs says more; not measured in older runs)."},
	{"Agent RSS at full sync", "MiB", false, func(r Run) *float64 { return r.AgentRSSMiB }, "VmRSS of the socklb agent or kube-proxy process."},
	{"Agent peak RSS at full sync", "MiB", false, func(r Run) *float64 { return r.AgentPeakRSSMiB },
		"VmHWM of the same process at the same moment: the highest resident set since it started, which a memory limit must hold (not measured in older runs)."},
	{"Agent CPU at full sync", "s", false, func(r Run) *float64 { return r.AgentCPUS },
		"utime+stime of the process and of its waited-for children (kube-proxy's iptables-restore / nft), from start to full sync."},
}

func axes(runs []Run) (sizes []int, dps []string) {
	seen := map[string]bool{}
	for _, r := range runs {
		if !slices.Contains(sizes, r.NServices) {
			sizes = append(sizes, r.NServices)
		}
		seen[r.Dataplane] = true
	}
	slices.Sort(sizes)
	for _, d := range order {
		if seen[d] {
			dps = append(dps, d)
		}
	}
	return sizes, dps
}

func find(runs []Run, n int, dp string) (Run, bool) {
	for _, r := range runs {
		if r.NServices == n && r.Dataplane == dp {
			return r, true
		}
	}
	return Run{}, false
}

func value(runs []Run, n int, dp string, get func(Run) *float64) (float64, bool) {
	r, ok := find(runs, n, dp)
	if !ok || get(r) == nil {
		return 0, false
	}
	return *get(r), true
}

func format(v float64) string {
	switch {
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// ratio is a column of a figure's table: dataplane a's value over b's.
type ratio struct{ a, b string }

// ratiosOf is the ratio columns for dataplanes dps: every dataplane to
// direct, and socklb to each kube-proxy mode.
func ratiosOf(dps []string) []ratio {
	var out []ratio
	for _, d := range dps {
		if d != "direct" && slices.Contains(dps, "direct") {
			out = append(out, ratio{d, "direct"})
		}
	}
	for _, kp := range []string{"iptables", "nftables"} {
		if slices.Contains(dps, "socklb") && slices.Contains(dps, kp) {
			out = append(out, ratio{"socklb", kp})
		}
	}
	return out
}

// figureHead writes a figure's heading and note, then its table's header:
// the leading columns (lead, aligned by align), a column per dataplane in
// cols and one per ratio.
func figureHead(w *strings.Builder, title, unit string, higherBetter bool, note, lead, align string, cols []string, ratios []ratio) {
	better := "higher is better"
	if !higherBetter {
		better = "lower is better"
	}
	fmt.Fprintf(w, "### %s (%s; %s)\n\n", title, unit, better)
	if note != "" {
		fmt.Fprintf(w, "%s\n\n", note)
	}
	w.WriteString(lead)
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	for _, r := range ratios {
		fmt.Fprintf(w, " %s ÷ %s |", r.a, r.b)
	}
	fmt.Fprintf(w, "\n%s", align)
	for range len(cols) + len(ratios) {
		w.WriteString("---:|")
	}
	fmt.Fprintln(w)
}

// table writes one figure: a row per N, a column per dataplane, then the
// ratios: every dataplane to direct, and socklb to each kube-proxy mode.
func table(w *strings.Builder, runs []Run, sizes []int, dps []string, m metric) {
	ratios := ratiosOf(dps)
	// Drop columns with no figure at all (direct has no agent).
	var cols []string
	for _, d := range dps {
		for _, n := range sizes {
			if _, ok := value(runs, n, d, m.get); ok {
				cols = append(cols, d)
				break
			}
		}
	}
	var rcols []ratio
	for _, r := range ratios {
		if slices.Contains(cols, r.a) && slices.Contains(cols, r.b) {
			rcols = append(rcols, r)
		}
	}
	if len(cols) == 0 {
		return // a figure this run did not measure
	}
	figureHead(w, m.title, m.unit, m.higherBetter, m.note, "| N |", "|---:|", cols, rcols)
	for _, n := range sizes {
		fmt.Fprintf(w, "| %d |", n)
		for _, c := range cols {
			if v, ok := value(runs, n, c, m.get); ok {
				fmt.Fprintf(w, " %s |", format(v))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		for _, r := range rcols {
			a, oka := value(runs, n, r.a, m.get)
			b, okb := value(runs, n, r.b, m.get)
			if oka && okb && b != 0 {
				fmt.Fprintf(w, " %.2f× |", a/b)
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// mapTable is socklb's BPF map memory against N: per map and in total,
// per Service, and the growth from the previous N against N's growth.
func mapTable(w *strings.Builder, maps []MapMem) {
	fmt.Fprintf(w, "### socklb BPF map memory after full sync (KiB; lower is better)\n\n")
	if len(maps) == 0 {
		fmt.Fprintf(w, "Not measured in this run.\n\n")
		return
	}
	fmt.Fprintf(w, "Kernel memory of each pinned map (`bpftool map show`: bytes_memlock, the map's own accounting of its memory since Linux 6.4) ")
	fmt.Fprintf(w, "once every Service is programmed. Every hash map's bucket array is sized by max_entries at creation, and the LRU maps are preallocated, a fixed cost; the `BPF_F_NO_PREALLOC` hashes add their elements as entries are written. ")
	fmt.Fprintf(w, "The last two columns compare with the previous N: the memory each added Service (with its endpoints) costs, and the growth of the total against the growth of N.\n\n")
	maps = slices.Clone(maps)
	slices.SortFunc(maps, func(a, b MapMem) int { return a.NServices - b.NServices })
	var names []string
	for _, m := range maps {
		for k := range m.MapBytes {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "| N |")
	for _, k := range names {
		fmt.Fprintf(w, " %s |", k)
	}
	fmt.Fprintf(w, " total (MiB) | added per Service since the previous N (KiB) | growth of total ÷ growth of N |\n|---:|")
	for range len(names) + 3 {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
	for i, m := range maps {
		fmt.Fprintf(w, "| %d |", m.NServices)
		for _, k := range names {
			if b, ok := m.MapBytes[k]; ok {
				fmt.Fprintf(w, " %s |", format(float64(b)/1024))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintf(w, " %s |", format(m.TotalMiB))
		if i > 0 && maps[i-1].TotalMiB > 0 && maps[i-1].NServices != m.NServices {
			p := maps[i-1]
			fmt.Fprintf(w, " %s | %.3f× ÷ %.0f× |", format((m.TotalMiB-p.TotalMiB)*1024/float64(m.NServices-p.NServices)),
				m.TotalMiB/p.TotalMiB, float64(m.NServices)/float64(p.NServices))
		} else {
			fmt.Fprintf(w, " – | – |")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// churnTable is each agent's RSS and CPU at full sync and after the churn.
func churnTable(w *strings.Builder, runs []Run, churn []Churn) {
	fmt.Fprintf(w, "### Agent after churn (one endpoint change per second; lower is better)\n\n")
	if len(churn) == 0 {
		fmt.Fprintf(w, "Not measured in this run.\n\n")
		return
	}
	fmt.Fprintf(w, "RSS and CPU seconds (since the agent's start, children included) at full sync and after the churn, which follows the programming-latency changes: ")
	fmt.Fprintf(w, "the CPU added since full sync covers both. Each change moves one endpoint of a different filler Service.\n\n")
	churn = slices.Clone(churn)
	rank := func(d string) int { return slices.Index(order, d) }
	slices.SortFunc(churn, func(a, b Churn) int {
		if a.NServices != b.NServices {
			return a.NServices - b.NServices
		}
		return rank(a.Dataplane) - rank(b.Dataplane)
	})
	fmt.Fprintf(w, "CPU per change is the CPU of the churn alone (from its start) over its changes; – where the run did not record them.\n\n")
	fmt.Fprintf(w, "| N | dataplane | churn (s) | changes | RSS at full sync (MiB) | RSS after churn (MiB) | CPU at full sync (s) | CPU after churn (s) | CPU added (s) | CPU per change (ms) |\n")
	fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range churn {
		rss, cpu, added := "–", "–", "–"
		if r, ok := find(runs, c.NServices, c.Dataplane); ok {
			if r.AgentRSSMiB != nil {
				rss = format(*r.AgentRSSMiB)
			}
			if r.AgentCPUS != nil {
				cpu = format(*r.AgentCPUS)
				added = format(c.AgentCPUS - *r.AgentCPUS)
			}
		}
		changes, per := "–", "–"
		if v, ok := c.CPUPerChange(); ok {
			changes, per = fmt.Sprint(c.Changes), format(v*1e3)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.NServices, c.Dataplane, format(c.DurationS), changes, rss, format(c.AgentRSSMiB), cpu, format(c.AgentCPUS), added, per)
	}
	fmt.Fprintln(w)
}

// hookTable is socklb's hook cost per call at each N, from bpf_stats
// during its connect and UDP rounds.
func hookTable(w *strings.Builder, hc []HookCost) {
	fmt.Fprintf(w, "### Hook cost per call (bpf_stats)\n\n")
	if len(hc) == 0 {
		fmt.Fprintf(w, "Not recorded in this run.\n\n")
		return
	}
	fmt.Fprintf(w, "Each socklb program's run_time_ns ÷ run_cnt over one extra connect and UDP round after the measured ones (the kernel's BPF run-time stats, on only for that round, so the figures above never pay for them), read through the agent's pinned links. ")
	fmt.Fprintf(w, "Hooks the rounds do not run (IPv6, getpeername when the client does not call it) have no calls.\n\n")
	hc = slices.Clone(hc)
	slices.SortFunc(hc, func(a, b HookCost) int { return a.NServices - b.NServices })
	fmt.Fprintf(w, "| N | hook | calls | run time (ms) | ns/call |\n|---:|---|---:|---:|---:|\n")
	for _, h := range hc {
		names := make([]string, 0, len(h.Hooks))
		for name := range h.Hooks {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c := h.Hooks[name]
			if c.RunCount == 0 {
				continue
			}
			per := "–"
			if c.NSPerCall != nil {
				per = format(*c.NSPerCall)
			}
			fmt.Fprintf(w, "| %d | %s | %d | %s | %s |\n", h.NServices, name, c.RunCount, format(float64(c.RunTimeNS)/1e6), per)
		}
	}
	fmt.Fprintln(w)
}

// profileList links socklb's profiles of the run, relative to the page.
func profileList(w *strings.Builder, ps []Profile, link func(string) string) {
	fmt.Fprintf(w, "### socklb profiles\n\n")
	if len(ps) == 0 {
		fmt.Fprintf(w, "Not recorded in this run.\n\n")
		return
	}
	fmt.Fprintf(w, "From the agent's `--profiling` endpoint: the CPU from the metrics port's first answer over the full sync (`sync-cpu`), the heap after a GC once synced (`heap`, behind the RSS), the CPU over the churn (`churn-cpu`, behind the CPU per change). ")
	fmt.Fprintf(w, "Read one with `go tool pprof -top <file>`; the head of that output is beside it.\n\n")
	fmt.Fprintf(w, "| N | profile | window (s) | raw | top |\n|---:|---|---:|---|---|\n")
	for _, p := range ps {
		win := "–"
		if p.Seconds > 0 {
			win = format(p.Seconds)
		}
		fmt.Fprintf(w, "| %d | %s | %s | [%s](%s) | [%s](%s) |\n", p.NServices, p.Kind, win, p.Path, link(p.Path), p.Top, link(p.Top))
	}
	fmt.Fprintln(w)
}
