package host

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// Device is a network device of this namespace with the addresses the
// per-packet path needs: where it is, and which of the node's addresses a
// flow SNATed out through it takes as its source.
type Device struct {
	Name         string
	Index        int
	Addr4, Addr6 netip.Addr // invalid: none of that family
}

// DevicesCarrying names the Ethernet devices that hold any of addrs (the
// node's addresses): where packets for NodePorts arrive from other
// machines, so where the per-packet path attaches by default, as Cilium's
// device detection picks the devices with the node's addresses. Loopback
// is never one.
func DevicesCarrying(addrs []netip.Addr) ([]string, error) {
	list, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	var names []string
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !slices.Contains(addrs, ip.Unmap()) {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil {
			return nil, fmt.Errorf("reading interface %d: %w", a.LinkIndex, err)
		}
		// Packets from other machines arrive on Ethernet devices; the
		// loopback (localhost NodePorts are the socket hooks' job) and a
		// device without an Ethernet header never carry them.
		if l.Attrs().Flags&net.FlagLoopback != 0 || l.Attrs().EncapType != "ether" {
			continue
		}
		if !slices.Contains(names, l.Attrs().Name) {
			names = append(names, l.Attrs().Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Devices reads the named devices. Each one's SNAT address of a family is
// the first of prefer (the node's NodePort addresses) it holds, else its
// first global unicast address. A device that does not exist, or is not
// Ethernet (the per-packet programs read an Ethernet header), is an error
// naming it.
func Devices(names []string, prefer []netip.Addr) ([]Device, error) {
	var out []Device
	var errs []error
	for _, name := range names {
		l, err := netlink.LinkByName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("device %q: %w (check --devices)", name, err))
			continue
		}
		if l.Attrs().EncapType != "ether" {
			errs = append(errs, fmt.Errorf("device %q is %s, not Ethernet: the per-packet path reads Ethernet frames; leave it out of --devices", name, l.Attrs().EncapType))
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the addresses of %q: %w", name, err))
			continue
		}
		d := Device{Name: name, Index: l.Attrs().Index}
		var held []netip.Addr
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.IsGlobalUnicast() {
				held = append(held, ip.Unmap())
			}
		}
		pick := func(is4 bool) netip.Addr {
			for _, p := range prefer {
				if p.Is4() == is4 && slices.Contains(held, p) {
					return p
				}
			}
			for _, a := range held {
				if a.Is4() == is4 {
					return a
				}
			}
			return netip.Addr{}
		}
		d.Addr4, d.Addr6 = pick(true), pick(false)
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}
