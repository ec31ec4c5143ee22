// Command socklb-bench measures socklb side by side with the real
// kube-proxy (iptables and nftables modes) and with direct pod IPs, all fed
// by one real API server (internal/cluster) with the same objects, each
// dataplane in its own netns lab, one after the other. Each run stands
// alone under its name: <out>/<name>/results.json (the raw figures, with
// the git commit), <out>/<name>/profiles/ (socklb's CPU and heap profiles
// and their `go tool pprof -top`); bench/report turns every run directory
// into its BENCHMARKS.md section and plots, and the top-level BENCHMARKS.md.
//
//	socklb-bench --sizes 100 --rounds 1 --changes 5 --churn 5s --name smoke   # smoke (CI)
//	socklb-bench --sizes 10000,30000,100000 --rounds 5 --changes 50 --name n10k-100k
//	socklb-bench --scenario external --sizes 100,1000 --rounds 3 --name external-n100-1k
//
// --scenario external (external.go) measures instead clients on another
// machine through a NodePort: a multi-node lab per dataplane, the
// dataplane on both nodes, the outside machine connecting to node 1's
// NodePort with the backend on node 1 or on node 2. Its figures go to
// the raw file's "external"; socklb's device programs' cost to hook_cost.
//
// Besides the runs (a fixed set of keys, so runs of any date compare key
// by key and bench/report reads them all), the JSON holds socklb_maps
// (socklb's BPF map memory after its full sync, per map, from bpftool),
// churn (each agent's RSS and CPU after --churn of one endpoint change per
// second), hook_cost (bpf_stats of socklb's hooks over one extra round) and
// profiles (the files under profiles/).
//
// Needs root and the tool binaries of tests/e2e/tools (make e2e-tools).
// Figures are printed and written, never asserted: compare ratios to the
// baselines measured in the same run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/socklb/socklb/bench/schema"
	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

type config struct {
	scenario       string // clusterip or external
	fill           string // "etcd" or "api": how the filler objects are written
	sizes          []int
	dataplanes     []string
	rounds         int
	connects       int
	udp            int
	changes        int
	changeInterval time.Duration
	churn          time.Duration
	syncTimeout    time.Duration
	out            string
	name           string // the run's name: its raw file and its BENCHMARKS.md section
	runDir         string // <out>/<name>: the raw file, profiles, plots
	socklb         string
	kubeProxy      string
	tools          string
	keep           bool
	bpftool        bool   // socklb's map memory is measured with it
	cpu            int    // the CPU of the client and the servers
	self           string // this binary
	capacity       int    // the capacity case's N (capacity.go); 0: none
}

// sizeOut is what one size adds to the results.
type sizeOut struct {
	runs     []Run
	ext      []ExternalRun // the external scenario's
	notes    []string
	maps     []MapMem
	churn    []Churn
	hooks    []HookCost
	profiles []Profile
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "client" {
		if err := clientMain(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "server" {
		if err := serverMain(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := benchMain(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func benchMain() error {
	var cfg config
	var sizes, dps string
	flag.StringVar(&cfg.scenario, "scenario", schema.ScenarioClusterIP, "clusterip: a pod's connections to a ClusterIP (the default); external: clients on another machine through node 1's NodePort, to a pod on node 1 and on node 2, in a multi-node lab (--changes and --churn do not apply)")
	flag.StringVar(&sizes, "sizes", "100", "comma-separated numbers of Services (each with 10 endpoints)")
	flag.StringVar(&dps, "dataplanes", "direct,socklb,iptables,nftables", "dataplanes to measure")
	flag.IntVar(&cfg.rounds, "rounds", 1, "rounds of the connect and UDP tests (the median is reported)")
	flag.IntVar(&cfg.connects, "connects", 2000, "TCP connections per round")
	flag.IntVar(&cfg.udp, "udp", 5000, "UDP request/responses per round")
	flag.IntVar(&cfg.changes, "changes", 5, "EndpointSlice changes for the programming latency")
	flag.DurationVar(&cfg.changeInterval, "change-interval", 1100*time.Millisecond, "time between EndpointSlice changes (kube-proxy's min-sync-period is 1s)")
	flag.DurationVar(&cfg.churn, "churn", 10*time.Minute, "after the programming-latency changes, one endpoint change per second for this long, then the agent's RSS and CPU again (0: none)")
	flag.DurationVar(&cfg.syncTimeout, "sync-timeout", 15*time.Minute, "how long a dataplane may take to program all Services")
	flag.StringVar(&cfg.out, "out", "bench/results", "directory of the named runs (relative to the module root): this run writes <out>/<name>/")
	flag.StringVar(&cfg.name, "name", "", "name of this run (e.g. n10k-kube-proxy): its directory under --out (default: n<sizes>)")
	flag.StringVar(&cfg.socklb, "socklb", "", "socklb binary (default: built from this module)")
	flag.StringVar(&cfg.kubeProxy, "kube-proxy", "", "kube-proxy binary (default: from the tools directory)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the logs directory")
	flag.StringVar(&cfg.fill, "fill", "etcd", "how the filler Services and slices are written: etcd (straight into the API server's storage; kube-apiserver's ClusterIP allocator costs O(N) per Service create) or api")
	flag.IntVar(&cfg.cpu, "cpu", runtime.NumCPU()-1, "CPU for the client and the pods' servers: one request/response is one CPU's work")
	flag.IntVar(&cfg.capacity, "capacity", 0, "after the sizes, the capacity case at this N: the fillers rewritten with 2 ports, every 10th a NodePort, the Node with 4 addresses, socklb alone on its default maps (0: none)")
	flag.Parse()
	for _, s := range strings.Split(sizes, ",") {
		if s == "" && cfg.capacity > 0 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return fmt.Errorf("bad size %q", s)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	slices.Sort(cfg.sizes)
	if cfg.capacity > 0 && cfg.capacity < 2 {
		return fmt.Errorf("--capacity %d: at least 2 (the target and the probe)", cfg.capacity)
	}
	external := cfg.scenario == schema.ScenarioExternal
	if external && cfg.capacity > 0 {
		return fmt.Errorf("--capacity runs in the clusterip scenario")
	}
	if !external && cfg.scenario != schema.ScenarioClusterIP {
		return fmt.Errorf("--scenario %q: %s or %s", cfg.scenario, schema.ScenarioClusterIP, schema.ScenarioExternal)
	}
	if external && cfg.sizes[0] < 2+extServices {
		return fmt.Errorf("--scenario external: sizes from %d (N counts the fillers, target, probe and the %d NodePort Services)", 2+extServices, extServices)
	}
	if cfg.fill != "etcd" && cfg.fill != "api" {
		return fmt.Errorf("--fill %q: etcd or api", cfg.fill)
	}
	cfg.dataplanes = strings.Split(dps, ",")

	if os.Geteuid() != 0 {
		return errors.New("needs root: network namespaces, a child cgroup, BPF, kube-proxy in a namespace")
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		return err
	}
	need := []string{"etcd", "kube-apiserver", "kube-controller-manager"}
	if cfg.kubeProxy == "" && (slices.Contains(cfg.dataplanes, "iptables") || slices.Contains(cfg.dataplanes, "nftables")) {
		need = append(need, "kube-proxy")
	}
	tools, reason := cluster.ToolsDir(root, need...)
	if reason != "" {
		return errors.New(reason)
	}
	cfg.tools = tools
	if cfg.kubeProxy == "" {
		cfg.kubeProxy = filepath.Join(tools, "kube-proxy")
	}
	if _, err := exec.LookPath("bpftool"); err == nil {
		cfg.bpftool = true
	}
	for _, b := range []string{"iptables-save", "iptables-restore", "nft", "socat", "nsenter", "taskset"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found (apt-get install iptables nftables socat util-linux)", b)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// kube-proxy runs only inside lab namespaces: the host's rules and
	// sysctls must be the same after the run.
	hostBefore, err := hostSnapshot()
	if err != nil {
		return fmt.Errorf("reading the host namespace's rules: %w", err)
	}

	dir, err := os.MkdirTemp("", "socklb-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if cfg.keep {
			logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	if cfg.socklb == "" {
		if cfg.socklb, err = testkit.BuildAgent(); err != nil {
			return err
		}
		defer testkit.RemoveAgent()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.self = self

	cluster.Logf = logf
	cp, err := cluster.StartWith(tools, dir, cluster.Options{ServiceCIDR: serviceCIDR})
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer cp.Stop()
	cfgc := *cp.AdminConfig
	cfgc.QPS, cfgc.Burst = 2000, 4000
	kc, err := kubernetes.NewForConfig(&cfgc)
	if err != nil {
		return err
	}
	objs, err := setupObjects(ctx, kc)
	if err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	if external {
		if err := objs.setupExternal(ctx); err != nil {
			return fmt.Errorf("objects: %w", err)
		}
	}
	if cfg.fill == "etcd" {
		objs.etcd = cp.EtcdURL
	}

	if cfg.name == "" && sizes == "" {
		cfg.name = fmt.Sprintf("capacity-n%d", cfg.capacity)
	}
	if cfg.name == "" {
		cfg.name = "n" + strings.ReplaceAll(sizes, ",", "-")
		if external {
			cfg.name = "external-" + cfg.name
		}
	}
	if cfg.runDir, err = prepareRunDir(root, cfg.out, cfg.name); err != nil {
		return err
	}
	res := &Results{Scenario: cfg.scenario, Machine: machine(cfg, cp, root), Runs: []Run{}, SocklbMaps: []MapMem{}, Churn: []Churn{}, HookCost: []HookCost{}, Profiles: []Profile{}}
	if external {
		res.External = []ExternalRun{}
	}
	res.Machine["host_netns_before"] = hostBefore.String()
	gave := gaveUp{}
	for _, n := range cfg.sizes {
		if err := objs.grow(ctx, n); err != nil {
			return fmt.Errorf("creating %d Services: %w", n, err)
		}
		res.Machine["api_object_writes"] = strings.Join(objs.writeRates, ", ")
		var so sizeOut
		if external {
			so, err = externalSizeRun(ctx, &cfg, cp, n, dir, self, gave)
		} else {
			so, err = sizeRun(ctx, &cfg, cp, objs, n, dir, self, gave)
		}
		if err != nil {
			cfg.keep = true
			return errors.Join(fmt.Errorf("N=%d: %w", n, err), checkHost(hostBefore))
		}
		res.Runs = append(res.Runs, so.runs...)
		res.External = append(res.External, so.ext...)
		res.SocklbMaps = append(res.SocklbMaps, so.maps...)
		res.Churn = append(res.Churn, so.churn...)
		res.HookCost = append(res.HookCost, so.hooks...)
		res.Profiles = append(res.Profiles, so.profiles...)
		if len(so.notes) > 0 {
			old, _ := res.Machine["notes"].([]string)
			res.Machine["notes"] = append(old, so.notes...)
		}
		// After every size, so that a long run keeps what it measured.
		if err := write(cfg.runDir, res); err != nil {
			return err
		}
	}
	if cfg.capacity > 0 {
		logf("=== capacity case: N=%d", cfg.capacity)
		if err := objs.reshape(ctx, cfg.capacity); err != nil {
			return fmt.Errorf("capacity case: %w", err)
		}
		c, err := capacityRun(ctx, &cfg, cp, objs, cfg.capacity, dir, self)
		if err != nil {
			cfg.keep = true
			return errors.Join(fmt.Errorf("capacity case: %w", err), checkHost(hostBefore))
		}
		res.Capacity = append(res.Capacity, c)
		res.Machine["api_object_writes"] = strings.Join(objs.writeRates, ", ")
		if err := write(cfg.runDir, res); err != nil {
			return err
		}
	}
	if err := cp.Alive(); err != nil {
		return err
	}
	// Every lab is gone by now (each size closes its own).
	hostErr := checkHost(hostBefore)
	res.Machine["host_netns_after"] = "unchanged"
	if hostErr != nil {
		res.Machine["host_netns_after"] = hostErr.Error()
	}
	return errors.Join(write(cfg.runDir, res), hostErr)
}

// checkHost compares the host namespace's rules and sysctls with before.
func checkHost(before hostState) error {
	after, err := hostSnapshot()
	if err != nil {
		return fmt.Errorf("reading the host namespace's rules after the run: %w", err)
	}
	if d := before.diff(after); len(d) > 0 {
		return fmt.Errorf("the host namespace CHANGED during the run: %s", strings.Join(d, "; "))
	}
	logf("the host namespace's rules and sysctls are as before the run: %s", after)
	return nil
}

// prepare builds the dataplane's lab, starts the dataplane alone and
// measures what needs its agent: full sync, RSS and CPU, programming
// latency. Then it stops the agent: the datapath stays in place (socklb's
// pinned links and maps, kube-proxy's rules) for the connect and UDP
// rounds, which every lab takes in turn.
func prepare(ctx context.Context, d *dataplane, o *objects, n int, self string, r *Run) error {
	if err := d.newLab(); err != nil {
		return err
	}
	startedAt, err := d.start(ctx)
	if err != nil {
		return err
	}
	if err := d.startClient(ctx, self); err != nil {
		return err
	}
	tcpAddr, _ := d.addrs(o)
	var syncProf *pending
	if d.name == "socklb" {
		d.prof = &profiler{addr: d.metrics, dir: filepath.Join(d.cfg.runDir, "profiles"), run: d.cfg.runDir}
		secs := syncProfileSeconds(n, d.cfg.syncTimeout)
		syncProf = d.prof.background(ctx, n, "sync-cpu", fmt.Sprintf("profile?seconds=%d", secs), secs, func() error {
			return d.waitMetrics(startedAt)
		})
	}

	// Full sync: the target answers through its ClusterIP, and every
	// Service is programmed.
	if d.name != "direct" {
		resp, err := d.client.do(request{Op: "probe", Addr: tcpAddr, Want: "t", Timeout: d.cfg.syncTimeout, Interval: 2 * time.Millisecond, ConnectTimeout: 20 * time.Millisecond, SrcPorts: 10000})
		if err != nil {
			return err
		}
		if resp.Seen == 0 {
			// Reported, not fatal: the other dataplanes are still measured.
			d.unsynced = fmt.Sprintf("N=%d %s: not synced within %s (the target never answered through its ClusterIP); its figures are null", n, d.name, d.cfg.syncTimeout)
			logf("%s", d.unsynced)
			d.keepProfile(syncProf)
			if d.agent != nil {
				if u, err := d.usage(); err == nil {
					logf("at the timeout: agent RSS %.1f MiB (peak %.1f), CPU %.2fs", u.rssMiB, u.peakMiB, u.cpuS)
				}
				d.stopAgent()
			}
			return nil
		}
		done := time.Unix(0, resp.Seen)
		want := n + 1 // N-2 fillers, probe, target's TCP and UDP ports
		for {
			got, err := d.programmed()
			if err == nil && got >= want {
				break
			}
			if !d.agent.Alive() {
				return d.agent.ExitedErr()
			}
			if time.Since(startedAt) > d.cfg.syncTimeout {
				d.unsynced = fmt.Sprintf("N=%d %s: not synced within %s (%d of %d frontends programmed, %v); its figures are null", n, d.name, d.cfg.syncTimeout, got, want, err)
				logf("%s", d.unsynced)
				d.keepProfile(syncProf)
				d.stopAgent()
				return nil
			}
			time.Sleep(20 * time.Millisecond)
			done = time.Now()
		}
		r.FullSyncS = fptr(done.Sub(startedAt).Seconds())
		u, err := d.usage()
		if err != nil {
			return err
		}
		r.AgentRSSMiB, r.AgentPeakRSSMiB, r.AgentCPUS = fptr(u.rssMiB), fptr(u.peakMiB), fptr(u.cpuS)
		logf("full sync %.3fs, agent RSS %.1f MiB (peak %.1f), CPU %.2fs", *r.FullSyncS, u.rssMiB, u.peakMiB, u.cpuS)
		if d.name == "socklb" {
			sum, err1 := d.metric("socklb_sync_full_proxy_rules_duration_seconds_sum")
			cnt, err2 := d.metric("socklb_sync_full_proxy_rules_duration_seconds_count")
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			syncs := int(cnt)
			r.AgentFullSyncS, r.AgentFullSyncs = fptr(sum), &syncs
			logf("socklb's own part (LIST in -> programmed: rebuild and map writes): %.3fs over %d full syncs", sum, syncs)
			if d.cfg.bpftool {
				mb, err := d.mapMemory()
				if err != nil {
					return err
				}
				var total int64
				for _, b := range mb {
					total += b
				}
				d.maps = &MapMem{NServices: n, MapBytes: mb, TotalMiB: *fptr(float64(total) / (1 << 20))}
				logf("socklb maps: %.2f MiB in all %v", d.maps.TotalMiB, mb)
			} else {
				logf("bpftool not found: socklb's map memory not measured")
			}
			// The CPU profile of the sync ends before the changes start,
			// so that its samples are the sync's; the heap profile follows
			// the RSS reading above.
			d.keepProfile(syncProf)
			d.keepProfile(d.prof.background(ctx, n, "heap", "heap?gc=1", 0, nil))
		}
	}

	// socklb's own part of every change from here on (the probe's and
	// the churn's), from its histogram, with /metrics scraped every
	// second as a Prometheus would.
	var agentLat *agentLatency
	if d.name == "socklb" && (d.cfg.changes > 0 || d.cfg.churn > 0) {
		var err error
		if agentLat, err = startAgentLatency(d.metrics); err != nil {
			return err
		}
		defer agentLat.abort()
	}

	// Programming latency: flip the probe Service between pods a and b;
	// the client connects every 0.5 ms until the new pod answers.
	if d.name != "direct" && d.cfg.changes > 0 {
		// Where socklb's time goes: its own sync (snapshot, servicemap,
		// map diff) against the whole latency.
		var sum0, cnt0 float64
		if d.name == "socklb" {
			sum0, _ = d.metric("socklb_sync_proxy_rules_duration_seconds_sum")
			cnt0, _ = d.metric("socklb_sync_proxy_rules_duration_seconds_count")
		}
		var lat, watchLat []float64
		pw, err := watchProbe(ctx, o.c)
		if err != nil {
			return err
		}
		defer pw.stop()
		for i := 0; i < d.cfg.changes; i++ {
			if !d.agent.Alive() {
				return d.agent.ExitedErr()
			}
			want := "b"
			if o.probeOn == "b" {
				want = "a"
			}
			type answer struct {
				resp response
				err  error
			}
			ch := make(chan answer, 1)
			go func() {
				resp, err := d.client.do(request{Op: "probe", Addr: o.probeVIP + ":80", Want: want, Timeout: 60 * time.Second, Interval: 500 * time.Microsecond})
				ch <- answer{resp, err}
			}()
			time.Sleep(5 * time.Millisecond) // the client is probing
			got, at, err := o.flip(ctx)
			if err != nil {
				<-ch
				return err
			}
			if got != want {
				return fmt.Errorf("probe flipped to %s, expected %s", got, want)
			}
			a := <-ch
			if a.err != nil {
				return a.err
			}
			if a.resp.Seen == 0 {
				return fmt.Errorf("programming latency, change %d: %s", i+1, a.resp.FirstError)
			}
			lat = append(lat, float64(a.resp.Seen-at.UnixNano())/1e6)
			seen, err := pw.wait(o.probe.ResourceVersion, 10*time.Second)
			if err != nil {
				return fmt.Errorf("change %d: %w", i+1, err)
			}
			watchLat = append(watchLat, float64(seen.Sub(at).Nanoseconds())/1e6)
			if rest := d.cfg.changeInterval - time.Since(at); rest > 0 {
				time.Sleep(rest)
			}
		}
		if d.name == "socklb" {
			sum, err1 := d.metric("socklb_sync_proxy_rules_duration_seconds_sum")
			cnt, err2 := d.metric("socklb_sync_proxy_rules_duration_seconds_count")
			if err1 == nil && err2 == nil && cnt > cnt0 {
				logf("socklb: %d syncs during the changes, mean sync (snapshot + servicemap + map diff) %.1fms", int(cnt-cnt0), (sum-sum0)/(cnt-cnt0)*1e3)
			}
		}
		r.ProgLatencyP50ms, r.ProgLatencyP99ms = fptr(pct(lat, 50)), fptr(pct(lat, 99))
		r.WatchLatencyP50ms, r.WatchLatencyP99ms = fptr(pct(watchLat, 50)), fptr(pct(watchLat, 99))
		logf("programming latency over %d changes: p50 %.1fms p99 %.1fms (all %v)", len(lat), *r.ProgLatencyP50ms, *r.ProgLatencyP99ms, round1(lat))
		logf("the harness's own watch of the same changes: p50 %.1fms p99 %.1fms (all %v)", *r.WatchLatencyP50ms, *r.WatchLatencyP99ms, round1(watchLat))
	}
	if d.name != "direct" && d.cfg.churn > 0 {
		if err := churn(ctx, d, o, n); err != nil {
			return err
		}
	}
	if agentLat != nil {
		if err := agentLat.finish(r); err != nil {
			return err
		}
	}
	if d.agent != nil {
		d.stopAgent()
	}
	return nil
}

// churn changes one endpoint per second for --churn (a filler Service's,
// a different one each time), then reads the agent's RSS and CPU again.
func churn(ctx context.Context, d *dataplane, o *objects, n int) error {
	u0, err := d.usage()
	if err != nil {
		return err
	}
	var prof *pending
	if d.prof != nil {
		secs := max(1, int(d.cfg.churn.Seconds()))
		prof = d.prof.background(ctx, n, "churn-cpu", fmt.Sprintf("profile?seconds=%d", secs), secs, nil)
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	k := 0
	for time.Since(start) < d.cfg.churn {
		if err := o.churnOne(ctx, o.churned); err != nil {
			return fmt.Errorf("churn: %w", err)
		}
		o.churned++
		k++
		if !d.agent.Alive() {
			return d.agent.ExitedErr()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	u, err := d.usage()
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	d.churn = &Churn{NServices: n, Dataplane: d.name, DurationS: *fptr(el), AgentRSSMiB: *fptr(u.rssMiB), AgentPeakRSSMiB: *fptr(u.peakMiB),
		AgentCPUS: *fptr(u.cpuS), AgentCPUStartS: *fptr(u0.cpuS), Changes: k}
	if prof != nil {
		d.keepProfile(prof)
	}
	logf("after %.0fs of churn (%d endpoint changes): agent RSS %.1f MiB (peak %.1f), CPU %.2fs since start", el, k, u.rssMiB, u.peakMiB, u.cpuS)
	return nil
}

// rounds runs the connect and the UDP rounds, each round going through
// every lab in turn so that a change of background load hits them alike.
func rounds(cfg *config, ds []*dataplane, runs []*Run, o *objects) (hooks []HookCost, err error) {
	var live []*dataplane
	var liveRuns []*Run
	for i, d := range ds {
		if d.unsynced == "" {
			live, liveRuns = append(live, d), append(liveRuns, runs[i])
		}
	}
	ds, runs = live, liveRuns
	// Hook cost: one more socklb round after the measured ones, with the
	// kernel's run-time stats on, so that the measured connects/s and UDP
	// figures never pay for the stats' clock reads. The agent has stopped;
	// its pinned links still run the programs whose counters these are.
	counters := make([]*hookCounter, len(ds))
	for i, d := range ds {
		if d.name != "socklb" {
			continue
		}
		if counters[i], err = newHookCounter(d.fs.Path()); err != nil {
			return nil, err
		}
		defer counters[i].close()
	}
	tcp := make([][3][]float64, len(ds)) // rate, p50, p99 per round
	udp := make([][]float64, len(ds))
	for _, d := range ds { // warm-up: page cache, neighbours, conntrack
		tcpAddr, _ := d.addrs(o)
		if _, err := d.client.do(request{Op: "tcp", Addr: tcpAddr, Count: 100}); err != nil {
			return nil, err
		}
	}
	for k := 0; k < cfg.rounds; k++ {
		for i, d := range ds {
			tcpAddr, _ := d.addrs(o)
			resp, err := d.client.do(request{Op: "tcp", Addr: tcpAddr, Count: cfg.connects})
			if err != nil {
				return nil, err
			}
			// A rare failure (a SYN lost twice) is reported; more is a bug.
			if resp.Errors*100 > cfg.connects || resp.Replies["t"] != resp.OK {
				return nil, fmt.Errorf("%s: tcp to %s: %d ok, %d errors (%s), replies %v", d.name, tcpAddr, resp.OK, resp.Errors, resp.FirstError, resp.Replies)
			}
			if resp.Errors > 0 {
				logf("%s: %d of %d connects failed (%s)", d.name, resp.Errors, cfg.connects, resp.FirstError)
			}
			tcp[i][0] = append(tcp[i][0], float64(resp.OK)/resp.Elapsed.Seconds())
			tcp[i][1] = append(tcp[i][1], float64(resp.P50)/1e3)
			tcp[i][2] = append(tcp[i][2], float64(resp.P99)/1e3)
		}
	}
	for k := 0; k < cfg.rounds; k++ {
		for i, d := range ds {
			_, udpAddr := d.addrs(o)
			resp, err := d.client.do(request{Op: "udp", Addr: udpAddr, Count: cfg.udp})
			if err != nil {
				return nil, err
			}
			if resp.Errors*100 > cfg.udp {
				return nil, fmt.Errorf("%s: udp to %s: %d ok, %d errors (%s)", d.name, udpAddr, resp.OK, resp.Errors, resp.FirstError)
			}
			udp[i] = append(udp[i], float64(resp.OK)/resp.Elapsed.Seconds())
		}
	}
	for i, d := range ds {
		if counters[i] == nil {
			continue
		}
		tcpAddr, udpAddr := d.addrs(o)
		if err := counters[i].around(func() error {
			if _, err := d.client.do(request{Op: "tcp", Addr: tcpAddr, Count: cfg.connects}); err != nil {
				return err
			}
			_, err := d.client.do(request{Op: "udp", Addr: udpAddr, Count: cfg.udp})
			return err
		}); err != nil {
			return nil, fmt.Errorf("%s: the bpf_stats round: %w", d.name, err)
		}
	}
	for i, d := range ds {
		r := runs[i]
		r.ConnectsPerS, r.ConnectP50us, r.ConnectP99us = fptr(median(tcp[i][0])), fptr(median(tcp[i][1])), fptr(median(tcp[i][2]))
		r.UDPRRPerS = fptr(median(udp[i]))
		logf("%-8s TCP %.0f connects/s (rounds %v), connect p50 %.1fµs p99 %.1fµs; UDP %.0f req/s (rounds %v)",
			d.name, *r.ConnectsPerS, round0(tcp[i][0]), *r.ConnectP50us, *r.ConnectP99us, *r.UDPRRPerS, round0(udp[i]))
		if counters[i] != nil {
			hc := counters[i].result(r.NServices)
			for _, name := range slices.Sorted(maps.Keys(hc.Hooks)) {
				if c := hc.Hooks[name]; c.NSPerCall != nil {
					logf("%s: %s %.0f ns/call over %d calls (bpf_stats)", d.name, name, *c.NSPerCall, c.RunCount)
				}
			}
			hooks = append(hooks, hc)
		}
	}
	return hooks, nil
}

// sizeRun measures every dataplane with n Services in place.
func sizeRun(ctx context.Context, cfg *config, cp *cluster.ControlPlane, o *objects, n int, dir, self string, gave gaveUp) (so sizeOut, err error) {
	var ds []*dataplane
	var runs []*Run
	defer func() {
		for i := len(ds) - 1; i >= 0; i-- {
			if cerr := ds[i].close(); cerr != nil {
				logf("cleanup of %s: %v", ds[i].name, cerr)
				err = errors.Join(err, cerr)
			}
		}
	}()
	var skipped []Run
	var live []string
	for _, name := range cfg.dataplanes {
		if err := ctx.Err(); err != nil {
			return so, err
		}
		if note := gave.note(name, cfg.syncTimeout); note != "" {
			logf("=== N=%d %s: %s", n, name, note)
			skipped = append(skipped, Run{NServices: n, Dataplane: name, Note: note})
			so.notes = append(so.notes, fmt.Sprintf("N=%d %s: %s", n, name, note))
			continue
		}
		live = append(live, name)
		logf("=== N=%d %s", n, name)
		ddir := filepath.Join(dir, fmt.Sprintf("%d-%s", n, name))
		if err := os.MkdirAll(ddir, 0o755); err != nil {
			return so, err
		}
		d := &dataplane{name: name, cfg: cfg, cp: cp, dir: ddir}
		ds = append(ds, d)
		r := &Run{NServices: n, Dataplane: name}
		runs = append(runs, r)
		if err := prepare(ctx, d, o, n, self, r); err != nil {
			if d.agent != nil {
				logf("last lines of %s:\n%s", d.agent.LogPath, d.agent.Tail(30))
			}
			return so, fmt.Errorf("%s: %w", name, err)
		}
	}
	logf("=== N=%d connect and UDP rounds, %s in turn", n, strings.Join(live, ", "))
	if so.hooks, err = rounds(cfg, ds, runs, o); err != nil {
		return so, err
	}
	for i, r := range runs {
		if ds[i].unsynced != "" {
			r.Note = fmt.Sprintf("did not sync within %s", cfg.syncTimeout)
			so.notes = append(so.notes, ds[i].unsynced)
			gave.record(r.Dataplane, n)
		}
		b, _ := json.Marshal(r)
		logf("result: %s", b)
		so.runs = append(so.runs, *r)
		if ds[i].maps != nil {
			so.maps = append(so.maps, *ds[i].maps)
		}
		if ds[i].churn != nil {
			so.churn = append(so.churn, *ds[i].churn)
		}
		so.profiles = append(so.profiles, ds[i].profiles...)
		so.notes = append(so.notes, ds[i].profileNotes...)
	}
	so.runs = append(so.runs, skipped...)
	return so, nil
}

func fptr(f float64) *float64 {
	f = math.Round(f*1000) / 1000
	return &f
}

func median(v []float64) float64 { return pct(v, 50) }

// pct is the nearest-rank percentile.
func pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(float64(p)/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func round0(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(math.Round(x))
	}
	return out
}

func round1(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*10) / 10
	}
	return out
}

func machine(cfg config, cp *cluster.ControlPlane, root string) map[string]any {
	m := map[string]any{
		"run":                   cfg.name,
		"date":                  time.Now().UTC().Format(time.RFC3339),
		"go":                    runtime.Version(),
		"cpus":                  runtime.NumCPU(),
		"kubernetes":            "v1.37.2 (kube-apiserver, kube-proxy built from k8s.io/kubernetes)",
		"rounds":                cfg.rounds,
		"connects_per_round":    cfg.connects,
		"udp_per_round":         cfg.udp,
		"prog_latency_changes":  cfg.changes,
		"change_interval_s":     cfg.changeInterval.Seconds(),
		"churn_s":               cfg.churn.Seconds(),
		"endpoints_per_service": endpointsPerService,
		"client_server_cpu":     cfg.cpu,
		"fillers_written":       map[string]string{"etcd": "into etcd as the API server stores them (its ClusterIP allocator costs O(N) per Service create); target, probe, their changes and the churn through the API server", "api": "through the API server"}[cfg.fill],
	}
	m["scenario"] = cfg.scenario
	if cfg.scenario == schema.ScenarioExternal {
		for _, k := range []string{"prog_latency_changes", "change_interval_s", "churn_s", "fillers_written"} {
			delete(m, k)
		}
		m["fillers_written"] = "into etcd as the API server stores them; the Nodes and the NodePort Services through the API server"
		if cfg.fill == "api" {
			m["fillers_written"] = "through the API server"
		}
		m["lab"] = "per dataplane: 2 node namespaces on an underlay bridge (no uplink), 1 pod each, an outside machine; the dataplane runs on both nodes"
		var cases []string
		for _, c := range extCases {
			cases = append(cases, fmt.Sprintf("%s: Service %s (NodePort, externalTrafficPolicy Cluster) %d/TCP %d/UDP on node 1 (%s) -> pod %s %s on node %d",
				c.name, c.svc, c.tcpNP, c.udpNP, extNode1IP, c.pod, c.podIP, c.node))
		}
		m["external_cases"] = strings.Join(cases, "; ")
		m["client"] = fmt.Sprintf("the lab's outside machine (%s), no socklb hook; direct: routes to each pod CIDR via the pod's node", lab.OutsideIPv4)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			m["mem_gib"] = math.Round(kb/1024/1024*10) / 10
		}
	}
	for _, c := range [][]string{{"iptables", "--version"}, {"nft", "--version"}} {
		if out, err := exec.Command(c[0], c[1:]...).Output(); err == nil {
			m[c[0]] = strings.TrimSpace(string(out))
		}
	}
	if out, err := exec.Command(cfg.socklb, "version").Output(); err == nil {
		m["socklb"] = strings.TrimSpace(string(out))
	}
	// The commit the harness and socklb were built from, recorded by the
	// run itself so that no figure is attributed to a commit by hand; a
	// dirty tree says so.
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		m["git_commit"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		m["git_dirty"] = len(strings.TrimSpace(string(out))) > 0
	}
	_ = cp
	return m
}

// rawFile is the run's raw results in its directory; bench/report reads
// every <out>/<name>/results.json.
const rawFile = "results.json"

// prepareRunDir makes <out>/<name> and empties its profiles: a rerun under
// the same name replaces the run, and a profile of the earlier run (at a
// size this one does not reach) must not pass for this run's.
func prepareRunDir(root, out, name string) (string, error) {
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return "", fmt.Errorf("run name %q: one path element, e.g. n10k-kube-proxy", name)
	}
	dir := filepath.Join(out, name)
	if err := os.RemoveAll(filepath.Join(dir, "profiles")); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// write saves the run's raw file, after every size so that a long run
// keeps what it measured.
func write(runDir string, res *Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	p := filepath.Join(runDir, rawFile)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return err
	}
	logf("wrote %s", p)
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
