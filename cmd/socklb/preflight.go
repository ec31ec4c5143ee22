package main

import "github.com/socklb/socklb/pkg/datapath"

// preflight is the last of the agent's checks, after the flags and the
// config file (agentOptions.parse) and the source (newSource), and before
// it creates anything: the bpffs path and the cgroup (datapath's Check:
// nothing mounted, made or attached), then the HTTP ports, bound now and
// held, since only a listen tells a taken port. A failure here leaves no
// pin directory, map, link or mount behind; before, a taken port was
// found after the hooks were attached, a cgroup that is not cgroup2 after
// the maps were pinned.
func preflight(f agentFlags, dp datapath.Config) (*listeners, error) {
	if err := dp.Check(); err != nil {
		return nil, err
	}
	return bindListeners(f.healthzAddr, f.metricsAddr)
}
