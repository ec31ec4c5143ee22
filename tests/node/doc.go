// Package node brings up a cluster of real Kubernetes nodes on this
// machine for `make conformance`: the control plane of internal/cluster
// plus kube-scheduler on an underlay bridge, and N nodes (Debian's
// containerd and runc, the CNI bridge, kubelet v1.37.2), all built or
// installed by the project's own scripts.
//
// The harness runs inside a mount and network namespace of its own
// (Enter, Setup): its network namespace holds the underlay bridge, the
// control plane and an "outside" namespace, and has no uplink, so nothing
// sent anywhere leaves the machine. Each node is a process of its own
// (StartNode, NodeMain) in a further network and mount namespace: a
// private bpffs (socklb's pins vanish with it), tmpfs for the runtime's
// fixed paths, and an ext4 disk image for kubelet's and containerd's
// roots; kube-proxy's iptables rules (in the control run) live and die in
// its network namespace.
//
// cgroups are the one thing namespaces do not scope: the harness makes a
// fresh child (sl-run-<pid>) in every hierarchy with a child per node
// (kubelet's cgroupRoot, and where socklb attaches, never the root) and one
// for itself. The parent process, which never enters the namespaces,
// kills whatever is left in the run's cgroup and removes it after the run,
// also when the run crashed.
package node
