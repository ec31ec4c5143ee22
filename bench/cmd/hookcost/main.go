// Command hookcost measures what socklb's hooks cost a connect() and a
// datagram (issue #12 item 3): with bpf_stats_enabled it reads each hook
// program's run_time_ns / run_cnt, and it times TCP connects and UDP
// queries through a ClusterIP against the same to the pod directly, in
// interleaved rounds, with the maps holding N Services of 10 endpoints.
//
// The maps are written by pkg/datapath's Apply, no API server involved, so
// one size takes seconds to program. Everything runs in a tests/lab world:
// hooks on a fresh child cgroup holding only the client, the client in a
// network namespace without a default route, pins on a private bpffs.
//
//	go run ./bench/cmd/hookcost -sizes 100,100000 -rounds 5 -out bench/results/hookcost
//	go run ./bench/cmd/hookcost -show bench/results/hookcost/*.json
//
// Needs root. Each run writes one raw JSON file named after the commit
// measured; bench/HOOKCOST.md quotes those files.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	sizes := flag.String("sizes", "100,100000", "Service counts to measure, comma-separated")
	rounds := flag.Int("rounds", 5, "interleaved rounds per size")
	dur := flag.Duration("duration", 2*time.Second, "TCP connect loop length per round and dataplane")
	queries := flag.Int("queries", 10000, "UDP queries per round and dataplane")
	testRuns := flag.Int("test-runs", 20000, "BPF_PROG_TEST_RUN calls of lb_translate per size")
	out := flag.String("out", "bench/results/hookcost", "directory for the raw JSON file")
	show := flag.Bool("show", false, "print the summary of the raw JSON files given as arguments, measure nothing")
	var maps mapSizes
	flag.Func("maps", "map capacities as the agent's flags set them, e.g. max-services=4096,max-backends=16384,max-sockets=4096 (default: the agent's defaults)", maps.set)
	flag.Parse()

	if *show {
		for _, f := range flag.Args() {
			r, err := readRun(f)
			if err != nil {
				fail(err)
			}
			fmt.Printf("%s:\n", f)
			r.print(os.Stdout)
		}
		return
	}

	if os.Geteuid() != 0 {
		fail(fmt.Errorf("needs root: it loads BPF programs, makes network namespaces and a cgroup"))
	}
	ns, err := parseSizes(*sizes)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	run, err := measure(ctx, config{sizes: ns, rounds: *rounds, duration: *dur, queries: *queries, testRuns: *testRuns, maps: maps})
	if err != nil {
		fail(err)
	}
	path, err := run.write(*out)
	if err != nil {
		fail(err)
	}
	run.print(os.Stdout)
	fmt.Printf("raw results: %s\n", path)
}

// mapSizes are the capacities a run's maps get: the memory a hook's
// lookups walk (bucket arrays, preallocated elements) grows with them
// whatever the number of Services.
type mapSizes struct {
	MaxServices uint32 `json:"max_services,omitempty"`
	MaxBackends uint32 `json:"max_backends,omitempty"`
	MaxSockets  uint32 `json:"max_sockets,omitempty"`
}

func (m *mapSizes) set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil || n == 0 {
			return fmt.Errorf("%q: want name=count", kv)
		}
		switch k {
		case "max-services":
			m.MaxServices = uint32(n)
		case "max-backends":
			m.MaxBackends = uint32(n)
		case "max-sockets":
			m.MaxSockets = uint32(n)
		default:
			return fmt.Errorf("%q: max-services, max-backends or max-sockets", k)
		}
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a Service count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "hookcost: %v\n", err)
	os.Exit(1)
}
