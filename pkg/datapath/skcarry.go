package datapath

import (
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// A carrier copies live sockets' sk_state from the old generation's map
// into the new one with the socket iterators of bpf/c/skcarry.c, in every
// network namespace of the cgroup's processes (where the hooks' sockets
// live, as for socket termination): socket storage has no map syscalls by
// socket, so a new sk_state map would otherwise start empty and every
// socket open across the migration would lose its frontend.
type carrier struct {
	old      *ebpf.Map // the old generation's sk_state
	tcp, udp *ebpf.Program
	carried  *ebpf.Map
	tcpIter  *link.Iter
	udpIter  *link.Iter
	cgroup   string
}

// canCarry says whether the old sk_state holds the one earlier layout the
// iterator reads (struct sock_state_from), or why not. Type names do not
// count, only fields, offsets and sizes: a struct renamed but not changed
// holds the same bytes.
func canCarry(old *ebpf.Map) (bool, string, error) {
	spec, err := socklbbpf.LoadSkcarry()
	if err != nil {
		return false, "", fmt.Errorf("reading embedded sk_state carry object: %w", err)
	}
	want, err := specLayout(spec.Maps["sk_state_from"])
	if err != nil {
		return false, "", err
	}
	have := pinnedLayout(old)
	want.types, have.types = typeShape(want.types), typeShape(have.types)
	if !have.sameShape(want) {
		return false, fmt.Sprintf("its layout (%s) is not the one this binary converts from (%s)", have, want), nil
	}
	return true, "", nil
}

var typeNames = regexp.MustCompile(`(struct|union|enum) [A-Za-z0-9_]*\(`)

func typeShape(desc string) string { return typeNames.ReplaceAllString(desc, "$1 (") }

// newCarrier loads the iterators against the old and the new sk_state and
// the new services map, which gives carried entries their Service port's
// id in the new maps.
func newCarrier(old, newState, services *ebpf.Map, cgroup string) (*carrier, error) {
	spec, err := socklbbpf.LoadSkcarry()
	if err != nil {
		return nil, fmt.Errorf("reading embedded sk_state carry object: %w", err)
	}
	var objs struct {
		TCP     *ebpf.Program `ebpf:"socklb_carry_tcp"`
		UDP     *ebpf.Program `ebpf:"socklb_carry_udp"`
		Carried *ebpf.Map     `ebpf:"sk_carried"`
	}
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
		MapReplacements: map[string]*ebpf.Map{
			socklbbpf.SocklbMapSkState:  newState,
			socklbbpf.SocklbMapServices: services,
			"sk_state_from":             old,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("loading the sk_state carry iterators (iter/tcp, iter/udp): %w", err)
	}
	c := &carrier{old: old, tcp: objs.TCP, udp: objs.UDP, carried: objs.Carried, cgroup: cgroup}
	if c.tcpIter, err = link.AttachIter(link.IterOptions{Program: c.tcp}); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the TCP sk_state carry iterator: %w", err)
	}
	if c.udpIter, err = link.AttachIter(link.IterOptions{Program: c.udp}); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the UDP sk_state carry iterator: %w", err)
	}
	return c, nil
}

// walk runs the iterators in every network namespace of the cgroup and
// returns how many sockets have been carried in total so far; sockets the
// kernel gave no storage in the new map are an error.
func (c *carrier) walk() (uint64, error) {
	var errs []error
	for _, ns := range cgroupNamespaces(c.cgroup) {
		readers, err := openIn(ns, c.tcpIter, c.udpIter)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range readers {
			if _, err := io.Copy(io.Discard, r); err != nil {
				errs = append(errs, fmt.Errorf("walking the sockets of %s: %w", ns, err))
			}
			r.Close()
		}
	}
	var n, lost uint64
	if err := c.carried.Lookup(uint32(0), &n); err != nil {
		errs = append(errs, fmt.Errorf("reading sk_carried: %w", err))
	}
	if err := c.carried.Lookup(uint32(1), &lost); err != nil {
		errs = append(errs, fmt.Errorf("reading sk_carried: %w", err))
	}
	if lost > 0 {
		errs = append(errs, fmt.Errorf("%d sockets got no storage in the new sk_state (kernel memory)", lost))
	}
	return n, errors.Join(errs...)
}

func (c *carrier) Close() {
	for _, l := range []*link.Iter{c.tcpIter, c.udpIter} {
		if l != nil {
			l.Close()
		}
	}
	c.tcp.Close()
	c.udp.Close()
	c.carried.Close()
	c.old.Close()
}
