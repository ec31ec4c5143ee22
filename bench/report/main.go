// Command report turns socklb-bench's results JSON into BENCHMARKS.md: a
// table per figure with ratios to direct and to kube-proxy, the
// performance targets (the goal, not a test) checked against the numbers,
// PNG plots, and the hand-written analysis of bench/NOTES.md. Run by `make bench` and `make bench-smoke`:
//
//	go run . -in ../results/latest.json -md ../../BENCHMARKS.md -plots ../results -notes ../NOTES.md
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

type Run struct {
	NServices        int      `json:"n_services"`
	Dataplane        string   `json:"dataplane"`
	ConnectsPerS     *float64 `json:"connects_per_s"`
	ConnectP50us     *float64 `json:"connect_p50_us"`
	ConnectP99us     *float64 `json:"connect_p99_us"`
	UDPRRPerS        *float64 `json:"udp_rr_per_s"`
	ProgLatencyP50ms *float64 `json:"prog_latency_p50_ms"`
	ProgLatencyP99ms *float64 `json:"prog_latency_p99_ms"`
	FullSyncS        *float64 `json:"full_sync_s"`
	AgentRSSMiB      *float64 `json:"agent_rss_mib"`
	AgentCPUS        *float64 `json:"agent_cpu_s"`
}

type MapMem struct {
	NServices int              `json:"n_services"`
	MapBytes  map[string]int64 `json:"map_bytes"`
	TotalMiB  float64          `json:"total_mib"`
}

type Churn struct {
	NServices   int     `json:"n_services"`
	Dataplane   string  `json:"dataplane"`
	DurationS   float64 `json:"duration_s"`
	AgentRSSMiB float64 `json:"agent_rss_mib"`
	AgentCPUS   float64 `json:"agent_cpu_s"`
}

type Results struct {
	Machine    map[string]any `json:"machine"`
	Runs       []Run          `json:"runs"`
	SocklbMaps []MapMem       `json:"socklb_maps"`
	Churn      []Churn        `json:"churn"`
}

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
	{"Full sync", "s", false, func(r Run) *float64 { return r.FullSyncS },
		"From the dataplane's start to every Service programmed and the target answering through its ClusterIP."},
	{"Agent RSS at full sync", "MiB", false, func(r Run) *float64 { return r.AgentRSSMiB }, "VmRSS of the socklb agent or kube-proxy process."},
	{"Agent CPU at full sync", "s", false, func(r Run) *float64 { return r.AgentCPUS },
		"utime+stime of the process and of its waited-for children (kube-proxy's iptables-restore / nft), from start to full sync."},
}

func main() {
	in := flag.String("in", "../results/latest.json", "results JSON")
	md := flag.String("md", "../../BENCHMARKS.md", "markdown output")
	plots := flag.String("plots", "../results", "directory for the PNG plots")
	notes := flag.String("notes", "../NOTES.md", "hand-written analysis appended to the page (optional)")
	flag.Parse()
	if err := run(*in, *md, *plots, *notes); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(in, md, plots, notes string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	sizes, dps := axes(res.Runs)
	if len(sizes) == 0 {
		return fmt.Errorf("%s: no runs", in)
	}
	// Plot paths are written relative to the markdown file.
	rel := func(p string) string {
		r, err := filepath.Rel(filepath.Dir(md), p)
		if err != nil {
			return p
		}
		return filepath.ToSlash(r)
	}
	connectsPNG := filepath.Join(plots, "connects.png")
	progPNG := filepath.Join(plots, "prog_latency.png")
	if err := plotMetric(res.Runs, sizes, dps, metrics[0], "Connects/s vs Services (higher is better)", connectsPNG); err != nil {
		return err
	}
	if err := plotMetric(res.Runs, sizes, dps, metrics[5], "Programming latency p99 vs Services (lower is better)", progPNG); err != nil {
		return err
	}

	var w strings.Builder
	fmt.Fprintf(&w, "# Benchmarks\n\n")
	fmt.Fprintf(&w, "<!-- Generated by bench/report from %s: do not edit; edit bench/NOTES.md and rerun `make bench` (or `make bench-report`). -->\n\n", filepath.Base(in))
	fmt.Fprintf(&w, "socklb side by side with the real kube-proxy v1.37.2 in iptables and nftables modes and with direct pod IPs (the physical limit), ")
	fmt.Fprintf(&w, "all fed by one real kube-apiserver with the same objects: N Services with %v endpoints each. Each dataplane runs alone, in its own netns lab ", res.Machine["endpoints_per_service"])
	fmt.Fprintf(&w, "(kube-proxy inside the client's network namespace, socklb on a child cgroup holding only the client). ")
	fmt.Fprintf(&w, "Ratios compare figures measured in the same run; on a shared 2-CPU machine, absolute numbers move by ±10%% between runs.\n\n")
	fmt.Fprintf(&w, "Regenerate: `make bench` (full: sizes, rounds and changes as flags, see the Makefile) or `make bench-smoke` (N=100, one round; runs in CI).\n\n")
	fmt.Fprintf(&w, "## Machine and run\n\n| | |\n|---|---|\n")
	keys := make([]string, 0, len(res.Machine))
	for k := range res.Machine {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "notes" {
			fmt.Fprintf(&w, "| %s | %v |\n", k, res.Machine[k])
		}
	}
	if notes, ok := res.Machine["notes"].([]any); ok && len(notes) > 0 {
		fmt.Fprintf(&w, "\nNotes of the run:\n\n")
		for _, n := range notes {
			fmt.Fprintf(&w, "- %v\n", n)
		}
	}
	fmt.Fprintf(&w, "\n## Targets (the goal, not a test)\n\n")
	targets(&w, res.Runs)
	fmt.Fprintf(&w, "\n## Plots\n\n![connects/s vs N](%s)\n\n![programming latency p99 vs N](%s)\n\n", rel(connectsPNG), rel(progPNG))
	for _, m := range metrics {
		table(&w, res.Runs, sizes, dps, m)
	}
	mapTable(&w, res.SocklbMaps)
	churnTable(&w, res.Runs, res.Churn)
	if b, err := os.ReadFile(notes); err == nil {
		fmt.Fprintf(&w, "\n%s", strings.TrimSpace(string(b))+"\n")
	}
	return os.WriteFile(md, []byte(w.String()), 0o644)
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

// table writes one figure: a row per N, a column per dataplane, then the
// ratios: every dataplane to direct, and socklb to each kube-proxy mode.
func table(w *strings.Builder, runs []Run, sizes []int, dps []string, m metric) {
	type ratio struct{ a, b string }
	var ratios []ratio
	for _, d := range dps {
		if d != "direct" && slices.Contains(dps, "direct") {
			ratios = append(ratios, ratio{d, "direct"})
		}
	}
	for _, kp := range []string{"iptables", "nftables"} {
		if slices.Contains(dps, "socklb") && slices.Contains(dps, kp) {
			ratios = append(ratios, ratio{"socklb", kp})
		}
	}
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
	better := "higher is better"
	if !m.higherBetter {
		better = "lower is better"
	}
	fmt.Fprintf(w, "### %s (%s; %s)\n\n", m.title, m.unit, better)
	if m.note != "" {
		fmt.Fprintf(w, "%s\n\n", m.note)
	}
	fmt.Fprintf(w, "| N |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	for _, r := range rcols {
		fmt.Fprintf(w, " %s ÷ %s |", r.a, r.b)
	}
	fmt.Fprintf(w, "\n|---:|")
	for range len(cols) + len(rcols) {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
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

func targets(w *strings.Builder, runs []Run) {
	check := func(what string, ok, measured bool, got string) {
		status := "not measured in this run"
		if measured {
			status = "**missed**"
			if ok {
				status = "met"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", what, got, status)
	}
	fmt.Fprintf(w, "| target | measured | |\n|---|---|---|\n")
	// connects/s >= 0.97x direct at every N
	var worst float64 = math.Inf(1)
	worstN, measured := 0, false
	for _, r := range runs {
		if r.Dataplane != "socklb" || r.ConnectsPerS == nil {
			continue
		}
		if d, ok := value(runs, r.NServices, "direct", func(r Run) *float64 { return r.ConnectsPerS }); ok {
			measured = true
			if x := *r.ConnectsPerS / d; x < worst {
				worst, worstN = x, r.NServices
			}
		}
	}
	check("socklb connects/s ≥ 0.97× direct at every N", worst >= 0.97, measured, fmt.Sprintf("worst %.2f× (N=%d)", worst, worstN))
	at := 10000
	s, okS := value(runs, at, "socklb", func(r Run) *float64 { return r.ConnectsPerS })
	i, okI := value(runs, at, "iptables", func(r Run) *float64 { return r.ConnectsPerS })
	ipt := ratioStr(s, i, okS && okI)
	if _, ran := find(runs, at, "iptables"); ran && okS && !okI {
		ipt = "– (kube-proxy iptables has no figure: it did not sync, see the notes of the run)"
	}
	check("socklb connects/s ≥ 1.5× kube-proxy iptables at 10 000 Services", okS && okI && s/i >= 1.5, okS && okI, ipt)
	p, okP := value(runs, at, "socklb", func(r Run) *float64 { return r.ProgLatencyP99ms })
	check("socklb programming latency p99 ≤ 10 ms at 10 000 Services", p <= 10, okP, valStr(p, okP, "ms"))
	f, okF := value(runs, at, "socklb", func(r Run) *float64 { return r.FullSyncS })
	check("socklb full sync of 10 000 Services / 100 000 endpoints ≤ 1 s", f <= 1, okF, valStr(f, okF, "s"))
	m, okM := value(runs, at, "socklb", func(r Run) *float64 { return r.AgentRSSMiB })
	check("socklb agent RSS ≤ 150 MiB at 10 000 Services", m <= 150, okM, valStr(m, okM, "MiB"))
}

func ratioStr(a, b float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func valStr(v float64, ok bool, unit string) string {
	if !ok {
		return "–"
	}
	return format(v) + " " + unit
}

var colors = map[string]color.Color{
	"direct":   color.RGBA{0x55, 0x55, 0x55, 0xff},
	"socklb":   color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	"iptables": color.RGBA{0xd6, 0x27, 0x28, 0xff},
	"nftables": color.RGBA{0xff, 0x7f, 0x0e, 0xff},
}

func plotMetric(runs []Run, sizes []int, dps []string, m metric, title, path string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (N), each with 10 endpoints"
	p.Y.Label.Text = m.unit
	if len(sizes) > 1 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
	} else {
		p.X.Min, p.X.Max = float64(sizes[0])*0.5, float64(sizes[0])*1.5
	}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	ymax := 0.0
	for i, d := range dps {
		var xys plotter.XYs
		for _, n := range sizes {
			if v, ok := value(runs, n, d, m.get); ok {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
				ymax = max(ymax, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = colors[d], colors[d]
		l.Width = vg.Points(2)
		s.Shape = draw.GlyphDrawer(shapes[i%len(shapes)])
		s.Radius = vg.Points(4)
		p.Add(l, s)
		p.Legend.Add(d, l, s)
	}
	p.Y.Max = ymax * 1.25
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}

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
	fmt.Fprintf(w, "| N | dataplane | churn (s) | RSS at full sync (MiB) | RSS after churn (MiB) | CPU at full sync (s) | CPU after churn (s) | CPU added (s) |\n")
	fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|\n")
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
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", c.NServices, c.Dataplane, format(c.DurationS), rss, format(c.AgentRSSMiB), cpu, format(c.AgentCPUS), added)
	}
	fmt.Fprintln(w)
}
