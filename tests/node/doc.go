// Package node brings up one real Kubernetes node on this machine for
// `make conformance`: the control plane of internal/cluster plus
// kube-scheduler, Debian's containerd and runc, the CNI bridge, and a
// kubelet v1.37.2, all built or installed by the project's own scripts.
//
// Everything runs inside a mount and a network namespace that the harness
// creates for itself (Enter). The network namespace has a bridge and a
// loopback and nothing else: no route leaves it, so a connection that no
// proxy translated fails inside the node instead of reaching another
// machine, and kube-proxy's iptables rules (in the control run) live and
// die with it. The mount namespace holds a fresh bpffs instance, so
// socklb's pins and links vanish with the run, and every mount containerd
// makes.
//
// cgroups are the one thing namespaces do not scope: the harness makes a
// fresh child (Cgroups) in every hierarchy, kubelet's cgroupRoot points
// there, and socklb attaches to that child of the cgroup v2 tree only. The
// parent process, which never enters the namespaces, kills whatever is
// left in that child and removes it after the run, also when the run
// crashed.
package node
