package main

// The raw file socklb-bench writes (<results>/<name>/results.json). Keys
// that an older harness did not write decode as zero or nil: the report
// says "not recorded" for them rather than a figure.

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
	Note             string   `json:"note"`
}

type MapMem struct {
	NServices int              `json:"n_services"`
	MapBytes  map[string]int64 `json:"map_bytes"`
	TotalMiB  float64          `json:"total_mib"`
}

type Churn struct {
	NServices      int     `json:"n_services"`
	Dataplane      string  `json:"dataplane"`
	DurationS      float64 `json:"duration_s"`
	AgentRSSMiB    float64 `json:"agent_rss_mib"`
	AgentCPUS      float64 `json:"agent_cpu_s"`
	AgentCPUStartS float64 `json:"agent_cpu_start_s"`
	Changes        int     `json:"changes"`
}

// CPUPerChange is the agent's CPU during the churn over its changes, or
// false when the run did not record them (harness before hook_cost).
func (c Churn) CPUPerChange() (float64, bool) {
	if c.Changes == 0 {
		return 0, false
	}
	return (c.AgentCPUS - c.AgentCPUStartS) / float64(c.Changes), true
}

type HookCall struct {
	RunCount  uint64   `json:"run_cnt"`
	RunTimeNS uint64   `json:"run_time_ns"`
	NSPerCall *float64 `json:"ns_per_call"`
}

type HookCost struct {
	NServices int                 `json:"n_services"`
	Hooks     map[string]HookCall `json:"hooks"`
}

type Profile struct {
	NServices int     `json:"n_services"`
	Kind      string  `json:"kind"`
	Seconds   float64 `json:"seconds"`
	Path      string  `json:"path"`
	Top       string  `json:"top"`
}

type Results struct {
	Machine    map[string]any `json:"machine"`
	Runs       []Run          `json:"runs"`
	SocklbMaps []MapMem       `json:"socklb_maps"`
	Churn      []Churn        `json:"churn"`
	HookCost   []HookCost     `json:"hook_cost"`
	Profiles   []Profile      `json:"profiles"`
}
