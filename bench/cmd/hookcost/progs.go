package main

import (
	"github.com/socklb/socklb/pkg/datapath"
)

// hookNames are the IPv4 hooks the lab's connects and datagrams run, the
// sock_release hook every socket of the cgroup passes when it closes, and
// the egress hook every packet of the cgroup's sockets passes while some
// Service has loadBalancerSourceRanges.
var hookNames = []string{"connect4", "sendmsg4", "recvmsg4", "getpeername4", "sock_release", "egress"}

// progStats is one program's cumulative run time and run count; the raw
// files keep its JSON keys.
type progStats = datapath.HookStats
