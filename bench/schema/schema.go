// Package schema is the raw file a benchmark run writes
// (bench/results/<name>/results.json): socklb-bench writes it and
// bench/report reads it, from the same types.
package schema

// Run is one (N, dataplane) result. Its keys stay fixed so that results of
// different dates compare; nil where a figure does not apply (or could not
// be measured).
type Run struct {
	NServices        int      `json:"n_services"`
	Dataplane        string   `json:"dataplane"`
	ConnectsPerS     *float64 `json:"connects_per_s"`
	ConnectP50us     *float64 `json:"connect_p50_us"`
	ConnectP99us     *float64 `json:"connect_p99_us"`
	UDPRRPerS        *float64 `json:"udp_rr_per_s"`
	ProgLatencyP50ms *float64 `json:"prog_latency_p50_ms"`
	ProgLatencyP99ms *float64 `json:"prog_latency_p99_ms"`
	// WatchLatency is the same changes seen by the harness's own watch:
	// the API server's part of the programming latency (null in runs
	// before it was measured).
	WatchLatencyP50ms *float64 `json:"watch_latency_p50_ms,omitempty"`
	WatchLatencyP99ms *float64 `json:"watch_latency_p99_ms,omitempty"`
	// AgentLatency is socklb's own part of the same changes and of the
	// churn that follows, from its histogram
	// socklb_event_to_programmed_duration_seconds (informer event to maps
	// written, per changed Service), estimated from the buckets as
	// histogram_quantile does, over AgentLatencyChanges observations,
	// while /metrics was scraped every second (null for other dataplanes
	// and in runs before it was measured).
	AgentLatencyP50ms   *float64 `json:"agent_latency_p50_ms,omitempty"`
	AgentLatencyP99ms   *float64 `json:"agent_latency_p99_ms,omitempty"`
	AgentLatencyChanges *int     `json:"agent_latency_changes,omitempty"`
	// Scrapes of /metrics during those changes, and the longest.
	Scrapes     *int     `json:"scrapes,omitempty"`
	ScrapeMaxMs *float64 `json:"scrape_max_ms,omitempty"`
	FullSyncS   *float64 `json:"full_sync_s"`
	// AgentFullSyncS is socklb's own part of FullSyncS: the seconds its
	// full syncs took, the informers' LIST already in (rebuild and map
	// writes, socklb_sync_full_proxy_rules_duration_seconds_sum), over
	// AgentFullSyncs of them, the first sync alone when 1 (null for other
	// dataplanes and in runs before it was measured).
	AgentFullSyncS *float64 `json:"agent_full_sync_s,omitempty"`
	AgentFullSyncs *int     `json:"agent_full_syncs,omitempty"`
	AgentRSSMiB    *float64 `json:"agent_rss_mib"`
	// AgentPeakRSSMiB is the process's high-water mark (VmHWM) at the same
	// moment: the full sync's peak (null in runs before it was measured).
	AgentPeakRSSMiB *float64 `json:"agent_peak_rss_mib,omitempty"`
	AgentCPUS       *float64 `json:"agent_cpu_s"`
	// Note says why the figures are null: not synced within the timeout,
	// or not attempted after that at a smaller N.
	Note string `json:"note,omitempty"`
}

// MapMem is the kernel memory of socklb's BPF maps after its full sync:
// per pinned map (bytes_memlock of `bpftool map show`) and in total. Kept
// out of Run, whose keys stay fixed.
type MapMem struct {
	NServices int              `json:"n_services"`
	MapBytes  map[string]int64 `json:"map_bytes"`
	TotalMiB  float64          `json:"total_mib"`
}

// Churn is an agent's RSS and CPU seconds (since its start, as in Run)
// after --churn of one endpoint change per second, which follows the
// programming-latency changes.
type Churn struct {
	NServices   int     `json:"n_services"`
	Dataplane   string  `json:"dataplane"`
	DurationS   float64 `json:"duration_s"`
	AgentRSSMiB float64 `json:"agent_rss_mib"`
	// AgentPeakRSSMiB is VmHWM: the highest since the agent started.
	AgentPeakRSSMiB float64 `json:"agent_peak_rss_mib,omitempty"`
	AgentCPUS       float64 `json:"agent_cpu_s"`
	// The churn's own share: CPU seconds at its start and the changes it
	// made, so that CPU per endpoint change excludes the full sync and the
	// programming-latency changes.
	AgentCPUStartS float64 `json:"agent_cpu_start_s"`
	Changes        int     `json:"changes"`
}

// CPUPerChange is the agent's CPU during the churn alone over the changes
// it made; false when the run did not record them.
func (c Churn) CPUPerChange() (float64, bool) {
	if c.Changes == 0 {
		return 0, false
	}
	return (c.AgentCPUS - c.AgentCPUStartS) / float64(c.Changes), true
}

// HookCost is what each of socklb's hook programs cost per call in one
// extra connect and UDP round at one N (--connects connects, --udp
// requests), from the kernel's bpf_stats (run_cnt, run_time_ns), read
// through the agent's pinned links.
type HookCost struct {
	NServices int                 `json:"n_services"`
	Hooks     map[string]HookCall `json:"hooks"`
}

type HookCall struct {
	RunCount  uint64   `json:"run_cnt"`
	RunTimeNS uint64   `json:"run_time_ns"`
	NSPerCall *float64 `json:"ns_per_call"` // null: not called
}

// Profile is one saved profile: the raw file (gzipped protobuf, as pprof
// serves it) and the head of its `go tool pprof -top`, both relative to
// the run's directory.
type Profile struct {
	NServices int     `json:"n_services"`
	Kind      string  `json:"kind"` // sync-cpu, heap, churn-cpu
	Seconds   float64 `json:"seconds,omitempty"`
	Path      string  `json:"path"`
	Top       string  `json:"top"`
}

// ExternalRun is one (N, case, dataplane) result of the external
// scenario (socklb-bench --scenario external): clients on the lab's
// outside machine reach a NodePort of node 1, whose backend is on node 1
// (case "local": DNAT only) or on node 2 (case "remote": the reply comes
// back through node 1). Its keys stay fixed as Run's; nil where a figure
// could not be measured.
type ExternalRun struct {
	NServices int    `json:"n_services"`
	Case      string `json:"case"`      // local, remote
	Dataplane string `json:"dataplane"` // direct, socklb, iptables, nftables
	// Backend is the pod that answers ("n1-p1"), Addr where the outside
	// client connected (TCP; UDP goes to the same address at the UDP
	// port): node 1's NodePort, or the pod itself for direct.
	Backend string `json:"backend"`
	Addr    string `json:"addr"`
	UDPAddr string `json:"udp_addr"`
	// BackendSaw is the source address the backend saw on a TCP
	// connection: the client's own, or a node's (SNAT).
	BackendSaw   string   `json:"backend_saw"`
	ConnectsPerS *float64 `json:"connects_per_s"`
	ConnectP50us *float64 `json:"connect_p50_us"`
	ConnectP99us *float64 `json:"connect_p99_us"`
	UDPRRPerS    *float64 `json:"udp_rr_per_s"`
	// Every round's figure, in the order the rounds ran (the medians
	// above are theirs): a figure that drifts over the run shows here.
	ConnectsPerSRounds []float64 `json:"connects_per_s_rounds,omitempty"`
	UDPRRPerSRounds    []float64 `json:"udp_rr_per_s_rounds,omitempty"`
	// What the measured TCP rounds (ConnectsMeasured connects in all)
	// retransmitted: SYNs the client sent again (TcpExt TCPSynRetrans in
	// the outside machine's namespace), and SYNs the backend's TIME_WAIT
	// sockets refused as older than their connection's last segment
	// (TcpExt PAWSTimewait in the pod's namespace).
	ConnectsMeasured    int    `json:"connects_measured,omitempty"`
	SynRetrans          *int64 `json:"syn_retrans,omitempty"`
	BackendPAWSTimewait *int64 `json:"backend_paws_timewait,omitempty"`
	// Note says why the figures are null (not synced within the timeout).
	Note string `json:"note,omitempty"`
}

// Results is the whole raw file of one run.
type Results struct {
	// Scenario is what the run measured: "clusterip" (pods' connections to
	// ClusterIPs: Runs and the rest) or "external" (clients on another
	// machine through a NodePort: External, and HookCost for socklb's
	// device programs). Empty in runs from before the external scenario:
	// clusterip.
	Scenario   string         `json:"scenario,omitempty"`
	Machine    map[string]any `json:"machine"`
	Runs       []Run          `json:"runs"`
	External   []ExternalRun  `json:"external,omitempty"`
	SocklbMaps []MapMem       `json:"socklb_maps"`
	Churn      []Churn        `json:"churn"`
	HookCost   []HookCost     `json:"hook_cost"`
	Profiles   []Profile      `json:"profiles"`
	// Capacity is the capacity case, when the run had one (--capacity).
	Capacity []Capacity `json:"capacity,omitempty"`
}

// Capacity is whether socklb's default maps took every Service of the
// capacity case (#22): NServices Services (the target and the probe
// among them) of EndpointsPerService endpoints and Ports ports each,
// NodePortServices of them NodePorts, on a Node with NodeAddresses, all
// read from socklb's own metrics after its full sync, and whether the
// target's NodePort answered at each Node address.
type Capacity struct {
	NServices           int      `json:"n_services"`
	Ports               int      `json:"ports"`
	EndpointsPerService int      `json:"endpoints_per_service"`
	NodePortServices    int      `json:"nodeport_services"`
	NodeAddresses       []string `json:"node_addresses"`
	FullSyncS           *float64 `json:"full_sync_s"`
	// Frontends and Slots (socklb_frontends, socklb_backends: the
	// endpoints of every frontend) as desired and as programmed
	// (socklb_frontends_programmed, socklb_backends_programmed).
	Frontends           int `json:"frontends"`
	FrontendsProgrammed int `json:"frontends_programmed"`
	Slots               int `json:"slots"`
	SlotsProgrammed     int `json:"slots_programmed"`
	// RefusedServices counts socklb_refused_services' series: Services
	// the maps had no room for.
	RefusedServices int `json:"refused_services"`
	// MapPressure is socklb_bpf_map_pressure per map: entries over
	// capacity.
	MapPressure map[string]float64 `json:"map_pressure"`
	MapMiB      *float64           `json:"map_mib"`
	AgentRSSMiB *float64           `json:"agent_rss_mib"`
	// AgentPeakRSSMiB is VmHWM at the same moment.
	AgentPeakRSSMiB *float64 `json:"agent_peak_rss_mib"`
	// NodePortAnswers is, per Node address, the connects to the
	// target's NodePort there that the target answered, of
	// NodePortTries.
	NodePortAnswers map[string]int `json:"nodeport_answers"`
	NodePortTries   int            `json:"nodeport_tries"`
	// Note says why figures are missing (no full sync in time).
	Note string `json:"note,omitempty"`
}

// Scenarios of a run.
const (
	ScenarioClusterIP = "clusterip"
	ScenarioExternal  = "external"
)

// ScenarioOf is the run's scenario, clusterip for runs that predate the
// field.
func (r Results) ScenarioOf() string {
	if r.Scenario == "" {
		return ScenarioClusterIP
	}
	return r.Scenario
}
