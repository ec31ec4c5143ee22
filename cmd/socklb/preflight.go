package main

import (
	"fmt"
	"os"

	"github.com/socklb/socklb/pkg/datapath"
)

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
	if err := checkProcSysNet(f); err != nil {
		return nil, err
	}
	return bindListeners(f.healthzAddr, f.metricsAddr)
}

// checkProcSysNet: a --proc-sys-net that is not there (a DaemonSet without
// its /proc/sys/net mount) would read as "conntrack is not loaded", and the
// timeouts would silently stay the kernel's.
func checkProcSysNet(f agentFlags) error {
	if f.ctEstablished == 0 && f.ctCloseWait == 0 {
		return nil
	}
	if fi, err := os.Stat(f.procSysNet); err != nil || !fi.IsDir() {
		return fmt.Errorf("--proc-sys-net=%s is not a directory (%v): pass the node's /proc/sys/net (the DaemonSet mounts it at /host/proc/sys/net), or set both --conntrack-tcp-timeout-* to 0", f.procSysNet, err)
	}
	return nil
}
