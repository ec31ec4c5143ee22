package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// run is the raw JSON file: everything measured, nothing derived that
// cannot be derived again from it.
type run struct {
	Commit   string       `json:"commit"`
	BPFTree  string       `json:"bpf_tree,omitempty"` // git tree id of bpf/: the objects measured
	Dirty    bool         `json:"dirty"`              // uncommitted changes under bpf/: the commit alone does not say what ran
	Started  time.Time    `json:"started"`
	Kernel   string       `json:"kernel"`
	CPUs     int          `json:"cpus"`
	LoadAvg  string       `json:"loadavg_at_start"`
	Rounds   int          `json:"rounds"`
	Duration string       `json:"tcp_duration_per_round"`
	Queries  int          `json:"udp_queries_per_round"`
	Maps     mapSizes     `json:"maps,omitempty"` // capacities set; zero: the agent's defaults
	Sizes    []sizeResult `json:"sizes"`
}

type sizeResult struct {
	Services int `json:"services"`
	// Hooks sums every socklb round's run_time_ns and run_cnt per program.
	Hooks map[string]progStats `json:"hooks"`
	// PassHooks is the same for connects and datagrams to the pod IP with
	// the hooks attached: a Service miss.
	PassHooks map[string]progStats `json:"passthrough_hooks,omitempty"`
	// EmptyHooks is emptyHook's connect4 over the same rounds' connects
	// to the pod IP from its own cgroup: the floor (runs of 2026-12-02
	// and later).
	EmptyHooks map[string]progStats `json:"empty_hooks,omitempty"`
	// TranslateAlone is lb_translate's SEC("syscall") wrapper, no socket.
	TranslateAlone progStats `json:"translate_alone"`
	Rounds         []round   `json:"rounds"`
}

type round struct {
	Socklb      pair `json:"socklb"`
	Direct      pair `json:"direct"`
	Passthrough pair `json:"passthrough,omitempty"`
	Empty       pair `json:"empty_program,omitempty"`
}

type pair struct {
	TCP rate `json:"tcp_connects"`
	UDP rate `json:"udp_queries"`
}

type rate struct {
	OK      int     `json:"ok"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
}

func newRun(cfg config) (*run, error) {
	commit, bpfTree, dirty, err := measuredCommit()
	if err != nil {
		return nil, err
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	load, _ := os.ReadFile("/proc/loadavg")
	return &run{
		Commit:   commit,
		BPFTree:  bpfTree,
		Dirty:    dirty,
		Started:  time.Now().UTC(),
		Kernel:   unix.ByteSliceToString(u.Release[:]),
		CPUs:     cpus(),
		LoadAvg:  strings.TrimSpace(string(load)),
		Rounds:   cfg.rounds,
		Duration: cfg.duration.String(),
		Queries:  cfg.queries,
		Maps:     cfg.maps,
	}, nil
}

func cpus() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	return set.Count()
}

func readRun(path string) (*run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not a hookcost run: %w", path, err)
	}
	return &r, nil
}

// write stores the run as <out>/<date>-<commit>.json and returns the path.
func (r *run) write(out string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%.12s.json", r.Started.Format("20060102T150405Z"), r.Commit)
	path := filepath.Join(out, name)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// print shows what the issue asks: ns per call per hook, and socklb over
// direct for connects/s and UDP req/s: the median of the rounds' ratios
// (each round measured both back to back) and, since the machine is shared,
// the spread of the middle half of them.
func (r *run) print(w io.Writer) {
	dirty := ""
	if r.Dirty {
		dirty = " (dirty)"
	}
	fmt.Fprintf(w, "commit %.12s%s, %d rounds, load %s\n", r.Commit, dirty, r.Rounds, r.LoadAvg)
	if r.Maps != (mapSizes{}) {
		fmt.Fprintf(w, "maps: %+v (zero: the default)\n", r.Maps)
	}
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "N=%d\n", s.Services)
		printHooks(w, "", s.Hooks)
		printHooks(w, "pod IP, hooks attached: ", s.PassHooks)
		printHooks(w, "pod IP, an empty program: ", s.EmptyHooks)
		if c, e := s.Hooks["connect4"], s.EmptyHooks["connect4"]; c.RunCount > 0 && e.RunCount > 0 && e.RunTimeNS > 0 {
			fmt.Fprintf(w, "  connect4 through the ClusterIP / empty connect4: %.2f\n", perCall(c)/perCall(e))
		}
		if a := s.TranslateAlone; a.RunCount > 0 {
			fmt.Fprintf(w, "  %-13s %7.1f ns/call  (%d test runs: lb_translate without a socket)\n", "translate", float64(a.RunTimeNS)/float64(a.RunCount), a.RunCount)
		}
		tcp, udp := s.ratios()
		fmt.Fprintf(w, "  connects/s socklb/direct %.3f (middle half of rounds %.3f-%.3f)\n", quantile(tcp, 0.5), quantile(tcp, 0.25), quantile(tcp, 0.75))
		fmt.Fprintf(w, "  UDP req/s  socklb/direct %.3f (middle half of rounds %.3f-%.3f)\n", quantile(udp, 0.5), quantile(udp, 0.25), quantile(udp, 0.75))
		if pt, pu := s.passRatios(); len(pt) > 0 {
			fmt.Fprintf(w, "  pod IP, hooks attached/direct: connects/s %.3f (%.3f-%.3f), UDP req/s %.3f (%.3f-%.3f)\n",
				quantile(pt, 0.5), quantile(pt, 0.25), quantile(pt, 0.75), quantile(pu, 0.5), quantile(pu, 0.25), quantile(pu, 0.75))
		}
	}
}

func printHooks(w io.Writer, what string, hooks map[string]progStats) {
	names := make([]string, 0, len(hooks))
	for n := range hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := hooks[n]
		if h.RunCount == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s%-13s %7.1f ns/call  (%d calls)\n", what, n, perCall(h), h.RunCount)
	}
}

func perCall(h progStats) float64 { return float64(h.RunTimeNS) / float64(h.RunCount) }

// ratios are each round's socklb over direct, sorted.
func (s sizeResult) ratios() (tcp, udp []float64) {
	var t, u []float64
	for _, rd := range s.Rounds {
		t = append(t, rd.Socklb.TCP.PerSec/rd.Direct.TCP.PerSec)
		u = append(u, rd.Socklb.UDP.PerSec/rd.Direct.UDP.PerSec)
	}
	sort.Float64s(t)
	sort.Float64s(u)
	return t, u
}

// passRatios are each round's pod-IP-with-hooks over direct, sorted; none
// for runs made before the tool measured it.
func (s sizeResult) passRatios() (tcp, udp []float64) {
	for _, rd := range s.Rounds {
		if rd.Passthrough.TCP.PerSec == 0 {
			return nil, nil
		}
		tcp = append(tcp, rd.Passthrough.TCP.PerSec/rd.Direct.TCP.PerSec)
		udp = append(udp, rd.Passthrough.UDP.PerSec/rd.Direct.UDP.PerSec)
	}
	sort.Float64s(tcp)
	sort.Float64s(udp)
	return tcp, udp
}

// quantile of sorted v, interpolating between neighbours.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	pos := q * float64(len(v)-1)
	i := int(pos)
	if i+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[i] + (pos-float64(i))*(v[i+1]-v[i])
}
