package main

// The section of a run of the external scenario (socklb-bench --scenario
// external): clients on the lab's outside machine through node 1's
// NodePort, per case (the backend on node 1 or on node 2) and N.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/socklb/socklb/bench/schema"
)

// caseOrder and caseWhat say what each case's path is, for the reader.
var caseOrder = []string{"local", "remote"}

var caseWhat = map[string]string{
	"local":  "backend on node 1: node 1 DNATs (and SNATs if the dataplane does)",
	"remote": "backend on node 2: node 1 DNATs and SNATs, the reply comes back through node 1",
}

func externalIntro(w *strings.Builder) {
	fmt.Fprintf(w, "External scenario: clients on another machine through a NodePort. Per dataplane a multi-node lab (internal/lab): two node namespaces on an underlay bridge with no uplink, one pod each, and an outside machine without any socklb hook. ")
	fmt.Fprintf(w, "The dataplane runs on both nodes, inside each node's namespace, fed by one real kube-apiserver: socklb's agent with `--packet-lb --devices eth0` (tcx programs on the node's eth0), or kube-proxy v1.37.2 in iptables or nftables mode. ")
	fmt.Fprintf(w, "The outside client connects to node 1's address at the NodePort of a Service (externalTrafficPolicy Cluster) whose one endpoint is node 1's pod (case `local`) or node 2's pod (case `remote`); `direct` connects to the pod itself, routed via the pod's node, and is the baseline. ")
	fmt.Fprintf(w, "N is the number of Services in the cluster: the two NodePort Services (one endpoint each), and as in the ClusterIP scenario its target and probe and N-4 fillers with 10 endpoints each. Ratios compare figures of the same run and case.\n\n")
	fmt.Fprintf(w, "A run: `make bench-external` (sizes and rounds as make variables, see the Makefile) writes bench/results/<name>/; `make bench-report` regenerates every page from the runs there.\n\n")
}

func extSizes(runs []ExternalRun) []int {
	var out []int
	for _, r := range runs {
		if !slices.Contains(out, r.NServices) {
			out = append(out, r.NServices)
		}
	}
	slices.Sort(out)
	return out
}

func extAxes(runs []ExternalRun) (sizes []int, cases, dps []string) {
	seenC, seenD := map[string]bool{}, map[string]bool{}
	for _, r := range runs {
		seenC[r.Case], seenD[r.Dataplane] = true, true
	}
	for _, c := range caseOrder {
		if seenC[c] {
			cases = append(cases, c)
		}
	}
	for _, d := range order {
		if seenD[d] {
			dps = append(dps, d)
		}
	}
	return extSizes(runs), cases, dps
}

func extFind(runs []ExternalRun, n int, c, dp string) (ExternalRun, bool) {
	for _, r := range runs {
		if r.NServices == n && r.Case == c && r.Dataplane == dp {
			return r, true
		}
	}
	return ExternalRun{}, false
}

// extMetric is a figure of ExternalRun.
type extMetric struct {
	title, unit  string
	higherBetter bool
	get          func(ExternalRun) *float64
	note         string
	noRatios     bool // counts, not rates: a ratio to direct's 0 means nothing
}

// perThousand is a count of the TCP rounds per 1 000 measured connects.
func perThousand(get func(ExternalRun) *int64) func(ExternalRun) *float64 {
	return func(r ExternalRun) *float64 {
		v := get(r)
		if v == nil || r.ConnectsMeasured == 0 {
			return nil
		}
		f := float64(*v) * 1000 / float64(r.ConnectsMeasured)
		return &f
	}
}

var extMetrics = []extMetric{
	{"Connects per second", "connects/s", true, func(r ExternalRun) *float64 { return r.ConnectsPerS },
		"New TCP connections per second from one sequential client on the outside machine (connect, 1-byte exchange, close); median of the rounds.", false},
	{"Connect latency p50", "µs", false, func(r ExternalRun) *float64 { return r.ConnectP50us }, "Time spent in connect(): the SYN to node 1 and the SYN-ACK back, median round.", false},
	{"Connect latency p99", "µs", false, func(r ExternalRun) *float64 { return r.ConnectP99us }, "", false},
	{"UDP request/response per second", "req/s", true, func(r ExternalRun) *float64 { return r.UDPRRPerS },
		"One unconnected UDP socket on the outside machine, sendto the NodePort and recvfrom the answer, which must come from the address asked; median of the rounds.", false},
	{"SYNs sent again", "per 1 000 connects", false, perThousand(func(r ExternalRun) *int64 { return r.SynRetrans }),
		"Retransmitted SYNs of the outside client (TcpExt TCPSynRetrans of its namespace) over all the measured TCP rounds, per 1 000 connects: each is a connect that took at least one retransmission timeout.", true},
	{"SYNs refused by the backend's TIME_WAIT (PAWS)", "per 1 000 connects", false, perThousand(func(r ExternalRun) *int64 { return r.BackendPAWSTimewait }),
		"SYNs that met a TIME_WAIT socket of an earlier connection with the same addresses and ports at the backend pod and were refused as older than its last segment (TcpExt PAWSTimewait of the pod's namespace), over the same rounds, per 1 000 connects.", true},
}

// extTable writes one figure: a row per (N, case), a column per
// dataplane, then every dataplane to direct and socklb to each kube-proxy
// mode.
func extTable(w *strings.Builder, runs []ExternalRun, m extMetric) {
	sizes, cases, dps := extAxes(runs)
	has := func(d string) bool {
		for _, r := range runs {
			if r.Dataplane == d && m.get(r) != nil {
				return true
			}
		}
		return false
	}
	var cols []string
	for _, d := range dps {
		if has(d) {
			cols = append(cols, d)
		}
	}
	if len(cols) == 0 {
		return
	}
	var ratios []ratio
	if !m.noRatios {
		ratios = ratiosOf(cols)
	}
	figureHead(w, m.title, m.unit, m.higherBetter, m.note, "| N | case |", "|---:|---|", cols, ratios)
	val := func(n int, c, d string) (float64, bool) {
		r, ok := extFind(runs, n, c, d)
		if !ok || m.get(r) == nil {
			return 0, false
		}
		return *m.get(r), true
	}
	for _, n := range sizes {
		for _, c := range cases {
			fmt.Fprintf(w, "| %d | %s |", n, c)
			for _, d := range cols {
				if v, ok := val(n, c, d); ok {
					fmt.Fprintf(w, " %s |", format(v))
				} else {
					fmt.Fprintf(w, " – |")
				}
			}
			for _, r := range ratios {
				a, oka := val(n, c, r.a)
				b, okb := val(n, c, r.b)
				if oka && okb && b != 0 {
					fmt.Fprintf(w, " %.2f× |", a/b)
				} else {
					fmt.Fprintf(w, " – |")
				}
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}

// roundsTable is each round's connects/s in the order the rounds ran: a
// dataplane whose figure drifts over the run shows it here.
func roundsTable(w *strings.Builder, runs []ExternalRun) {
	sizes, cases, dps := extAxes(runs)
	var cols []string
	for _, d := range dps {
		for _, r := range runs {
			if r.Dataplane == d && len(r.ConnectsPerSRounds) > 0 {
				cols = append(cols, d)
				break
			}
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "### Connects per second, round by round\n\n")
	fmt.Fprintf(w, "Each round's connects/s in the order the rounds ran (each round goes through every lab and case in turn); the median of these is the first table's.\n\n")
	fmt.Fprintf(w, "| N | case |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---:|---|")
	for range cols {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	for _, n := range sizes {
		for _, c := range cases {
			fmt.Fprintf(w, "| %d | %s |", n, c)
			for _, d := range cols {
				r, ok := extFind(runs, n, c, d)
				if !ok || len(r.ConnectsPerSRounds) == 0 {
					fmt.Fprintf(w, " – |")
					continue
				}
				parts := make([]string, len(r.ConnectsPerSRounds))
				for i, v := range r.ConnectsPerSRounds {
					parts[i] = fmt.Sprintf("%.0f", v)
				}
				fmt.Fprintf(w, " %s |", strings.Join(parts, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}

// pathTable says, per case and dataplane, where the client connected and
// which source address the backend saw (the client's own, or node 1's:
// SNAT).
func pathTable(w *strings.Builder, runs []ExternalRun) {
	sizes, cases, dps := extAxes(runs)
	fmt.Fprintf(w, "## The cases\n\n")
	for _, c := range cases {
		fmt.Fprintf(w, "- `%s`: %s.\n", c, caseWhat[c])
	}
	fmt.Fprintf(w, "\nWhere the outside client connected, and the source address the backend saw on a TCP connection (asked once per case after the warm-up): the client's own address when the path keeps it, a node's address when it SNATs.\n\n")
	fmt.Fprintf(w, "| N | case | backend | dataplane | TCP to | UDP to | the backend saw |\n|---:|---|---|---|---|---|---|\n")
	for _, n := range sizes {
		for _, c := range cases {
			for _, d := range dps {
				r, ok := extFind(runs, n, c, d)
				if !ok {
					continue
				}
				if r.Note != "" {
					fmt.Fprintf(w, "| %d | %s | %s | %s | – | – | – (%s) |\n", n, c, r.Backend, d, r.Note)
					continue
				}
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", n, c, r.Backend, d, r.Addr, r.UDPAddr, orDash(r.BackendSaw))
			}
		}
	}
	fmt.Fprintln(w)
}

// deviceTable is socklb's device programs' cost per packet, per case,
// node and program, from bpf_stats over one extra round.
func deviceTable(w *strings.Builder, hc []HookCost) {
	fmt.Fprintf(w, "### socklb's device programs per packet (bpf_stats)\n\n")
	if len(hc) == 0 {
		fmt.Fprintf(w, "Not recorded in this run.\n\n")
		return
	}
	fmt.Fprintf(w, "run_time_ns ÷ run_cnt of the tcx programs on each node's eth0 (ingress: packets arriving at the node; egress: packets leaving it), over one extra connect and UDP round per case after the measured ones, with the kernel's BPF run-time stats on only then. ")
	fmt.Fprintf(w, "A connect is about 5 packets each way (SYN, ACK, data, FIN, ACK), a UDP request/response 1.\n\n")
	hc = slices.Clone(hc)
	slices.SortFunc(hc, func(a, b HookCost) int { return a.NServices - b.NServices })
	fmt.Fprintf(w, "| N | case | node/program | packets | run time (ms) | ns/packet |\n|---:|---|---|---:|---:|---:|\n")
	for _, h := range hc {
		names := make([]string, 0, len(h.Hooks))
		for name := range h.Hooks {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int {
			ca, _, _ := strings.Cut(a, " ")
			cb, _, _ := strings.Cut(b, " ")
			if d := slices.Index(caseOrder, ca) - slices.Index(caseOrder, cb); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		for _, name := range names {
			c := h.Hooks[name]
			if c.RunCount == 0 {
				continue // node 2 in the local case: no packet crosses it
			}
			cs, prog, _ := strings.Cut(name, " ")
			per := "–"
			if c.NSPerCall != nil {
				per = format(*c.NSPerCall)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %d | %s | %s |\n", h.NServices, cs, prog, c.RunCount, format(float64(c.RunTimeNS)/1e6), per)
		}
	}
	fmt.Fprintln(w)
}

// externalSection is one run of the external scenario: machine, notes,
// the cases' paths, the figures.
func externalSection(r namedRun, page string) string {
	res := r.res
	var w strings.Builder
	dirty := ""
	if d, _ := res.Machine["git_dirty"].(bool); d {
		dirty = " (with uncommitted changes)"
	}
	_, _, dps := extAxes(res.External)
	fmt.Fprintf(&w, "# Run `%s` (external clients through a NodePort): commit %s%s, %s\n\n", r.name, short(r.commit()), dirty, orDash(r.date()))
	fmt.Fprintf(&w, "Raw figures: [%s](%s). N = %s; dataplanes: %s.\n\n", r.name+"/"+rawFile, rel(page, r.dir+"/"+rawFile), runSizes(res), strings.Join(dps, ", "))
	machineTable(&w, res)
	fmt.Fprintln(&w)
	pathTable(&w, res.External)
	fmt.Fprintf(&w, "## Figures\n\n")
	for i, m := range extMetrics {
		extTable(&w, res.External, m)
		if i == 0 {
			roundsTable(&w, res.External)
		}
	}
	deviceTable(&w, res.HookCost)
	return w.String()
}

// runSizes is the run's N, whatever its scenario.
func runSizes(res Results) string {
	var ns []int
	if res.ScenarioOf() == schema.ScenarioExternal {
		ns = extSizes(res.External)
	} else {
		ns = sizesOf(res.Runs)
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}
