package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// SetNodeAddresses makes node_addrs hold exactly the addresses NodePorts
// answer on: local, this node's (servicemap.NodePortAddresses), and
// remote, the other nodes' (servicemap.RemoteNodeAddresses). Both reach
// the NodePort frontends at the unspecified address, one per port: this
// node's are served there, and a socket dialling another node's NodePort
// is translated here instead of crossing to that node (unless the
// NodePort is LocalNodeOnly). Only the difference from what the map
// holds is written. An address in both lists is taken as this node's.
//
// The agent sets them before it programs the frontends: an address
// listed early reaches nothing until its NodePorts exist, while a
// NodePort programmed before its addresses would not be reached.
func (d *Datapath) SetNodeAddresses(local, remote []netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	want := make(map[socklbbpf.SocklbNodeAddrKey]socklbbpf.SocklbNodeAddrFlag, len(local)+len(remote))
	for _, a := range remote {
		want[socklbbpf.SocklbNodeAddrKey{Addr: addrBytes(a)}] = socklbbpf.SocklbNodeAddrFlagNODE_ADDR_REMOTE
	}
	for _, a := range local {
		want[socklbbpf.SocklbNodeAddrKey{Addr: addrBytes(a)}] = socklbbpf.SocklbNodeAddrFlagNODE_ADDR_LOCAL
	}
	var (
		k     socklbbpf.SocklbNodeAddrKey
		v     socklbbpf.SocklbNodeAddrFlag
		stale []socklbbpf.SocklbNodeAddrKey
	)
	have := map[socklbbpf.SocklbNodeAddrKey]bool{}
	it := d.t.nodeAddrs.Iterate()
	for it.Next(&k, &v) {
		if f, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if f == v {
			have[k] = true
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading node_addrs: %w", err)
	}
	var errs []error
	for _, k := range stale {
		if err := d.t.nodeAddrs.Delete(k); err != nil {
			errs = append(errs, fmt.Errorf("removing %s from node_addrs: %w", addrFromBytes(k.Addr), err))
		}
	}
	for k, f := range want {
		if have[k] {
			continue
		}
		if err := put(func() error { return d.t.nodeAddrs.Put(k, f) }); err != nil {
			errs = append(errs, fmt.Errorf("adding %s to node_addrs: %w", addrFromBytes(k.Addr), mapErr(socklbbpf.SocklbMapNodeAddrs, err)))
		}
	}
	return errors.Join(errs...)
}
