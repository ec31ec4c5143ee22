package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// SetRemoteNodeAddresses makes node_addrs hold exactly addrs: the other
// nodes' addresses whose NodePorts a socket here reaches through the
// wildcard NodePort frontends instead of crossing to that node. Only the
// difference from what the map holds is written.
func (d *Datapath) SetRemoteNodeAddresses(addrs []netip.Addr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	want := make(map[socklbbpf.SocklbNodeAddrKey]bool, len(addrs))
	for _, a := range addrs {
		want[socklbbpf.SocklbNodeAddrKey{Addr: addrBytes(a)}] = true
	}
	var (
		k     socklbbpf.SocklbNodeAddrKey
		v     socklbbpf.SocklbNodeAddrFlag
		stale []socklbbpf.SocklbNodeAddrKey
	)
	have := map[socklbbpf.SocklbNodeAddrKey]bool{}
	it := d.t.nodeAddrs.Iterate()
	for it.Next(&k, &v) {
		if want[k] && v == socklbbpf.SocklbNodeAddrFlagNODE_ADDR_REMOTE {
			have[k] = true
		} else if !want[k] {
			stale = append(stale, k)
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
	for k := range want {
		if have[k] {
			continue
		}
		if err := put(func() error { return d.t.nodeAddrs.Put(k, socklbbpf.SocklbNodeAddrFlagNODE_ADDR_REMOTE) }); err != nil {
			errs = append(errs, fmt.Errorf("adding %s to node_addrs: %w", addrFromBytes(k.Addr), mapErr(socklbbpf.SocklbMapNodeAddrs, err)))
		}
	}
	return errors.Join(errs...)
}
