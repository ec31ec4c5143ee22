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
// Nothing here takes a *testing.T: the demo and the benchmark use it as a
// library. Its private bpffs (World.BPFFS) is the test kit's.
package lab
