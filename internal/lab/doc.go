// Package lab builds throwaway network labs for socklb's integration tests
// and demo, following the safety rules every socklb test obeys (the
// README's Tests section):
//
//   - NewCgroup creates a fresh child cgroup (socklb-lab-<pid>-<n>) directly
//     under the cgroup2 mount; it never operates on the root cgroup itself.
//     Only processes this package starts (Client.Run) are placed in it, at
//     clone time (CLONE_INTO_CGROUP).
//   - New creates a client network namespace and one namespace per pod, each
//     pod joined to the client by its own veth pair. There is no default
//     route anywhere, so an address that socklb did not translate fails with
//     ENETUNREACH and nothing ever leaves the machine. No interface is ever
//     created in the host namespace.
//   - Servers are created in-process, inside the pod namespaces.
//   - Close undoes everything in reverse order, is idempotent, and is meant
//     for t.Cleanup (also on failure).
//
// Addresses: client "cli" has 10.244.0.1/32 and fd00::1/128 on every one of
// its veths; an extra client added with AddClient gets 10.244.0.<k>/32 and
// fd00::ffff:<k>/128 (k = 2, 3, ...). Pods get the addresses given in
// Config. Routes: in a client namespace "PODIP/32 dev <veth> src CLIENTIP",
// in a pod namespace "CLIENTIP/32 dev <veth>".
//
// Names: namespaces are sl-<pid>-<n>-cli, sl-<pid>-<n>-pod1, ... (n counts
// labs in this process); in a client namespace the veth to pod i is "vpod<i>",
// in a pod namespace the veth to client k is "vcli<k>".
//
// # Multi-node lab
//
// NewMultiNode builds several machines on this one, for the per-packet
// (tc) datapath's tests: traffic that arrives at a node from another
// machine. Names and addresses (p = sl-<pid>-<n>, from the same counter
// as New's labs, so no two labs of one process or of two processes
// collide):
//
//	namespace    role      interfaces                        addresses
//	p-ul         underlay  br0 (bridge): ports vn<i>, vout   none
//	p-out        outside   eth0 (port vout)                  10.250.0.100/24, fd00:250::100/64
//	p-n<i>       node i    eth0 (port vn<i>), vp<j> per pod  10.250.0.<10+i>/24, fd00:250::<10+i>/64
//	p-n<i>-p<j>  pod j     eth0 (peer of the node's vp<j>)   10.244.<i>.<10+j>/32, fd00:244:<i>::<10+j>/128
//
// (IPv6 only with MultiNodeConfig.IPv6; the IPv6 host numbers are the IPv4
// ones written as hex digits.) Node i's pod CIDR is 10.244.<i>.0/24 and
// fd00:244:<i>::/64. A node forwards (IPv4 and IPv6), has rp_filter off,
// sends and takes no ICMP redirects, routes every other node's pod CIDR
// via that node's underlay address and each of its pods' addresses to
// vp<j> (source: its underlay address), and has no default route. A pod's
// default route is its node: via the node's underlay address (on-link) for
// IPv4, via fe80::1, which the node puts on every vp<j>, for IPv6. The
// outside machine has no socklb hooks and routes nothing beyond the
// underlay until a test calls RouteVia (LoadBalancer IPs, externalIPs, a
// pod CIDR). IPv6 DAD is off (every address is unique by construction).
//
// Pods have default routes here, unlike in New's lab, and the rule still
// holds that nothing leaves the machine: every namespace on every path is
// the lab's, and the underlay bridge has no uplink and no address, so a
// packet can only ever reach another lab namespace. Nodes and the outside
// have no default route, so an address nobody routes fails with
// ENETUNREACH there (a pod's packet to it dies at its node). No interface is created in the host namespace: each
// veth is created with its two ends directly in their namespaces. The lab
// attaches no program anywhere; a socklb agent under test runs inside a
// node (Node.Command: nsenter --net=, keeping the mount namespace, so
// bpffs and cgroup2 stay visible) and attaches its tc programs to that
// node's eth0 (Node.Device). Close removes everything in reverse order,
// also after a failed NewMultiNode.
//
// Nothing here takes a *testing.T: the demo and the benchmark use it as a
// library. Its private bpffs (World.BPFFS) is the test kit's.
package lab
