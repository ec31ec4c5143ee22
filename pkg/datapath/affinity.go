package datapath

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/servicemap"
)

// affinityGroup is one Service port of one family: every frontend of it
// (ClusterIP, NodePorts, externalIPs, LoadBalancer IPs) shares an affinity
// id, because kube-proxy keeps its sessionAffinity `recent` lists in the
// endpoint chains (KUBE-SEP-*, pkg/proxy/iptables/proxier.go), which all of
// the port's frontends jump to. Families stay apart, as kube-proxy runs one
// proxier per family.
type affinityGroup struct {
	service types.NamespacedName
	port    string
	proto   servicemap.Protocol
	v4      bool
}

func groupOf(fe servicemap.Frontend) affinityGroup {
	return affinityGroup{service: fe.Service, port: fe.PortName, proto: fe.Key.Proto, v4: fe.Key.Addr.Unmap().Is4()}
}

type groupRef struct {
	id   uint32
	refs int
}

// refGroup returns fe's affinity id, allocating it for the port's first
// frontend; each frontend holds one reference until unrefGroup.
func (d *Datapath) refGroup(fe servicemap.Frontend) (uint32, error) {
	g := groupOf(fe)
	if r, ok := d.groups[g]; ok {
		r.refs++
		return r.id, nil
	}
	id, err := d.groupIDs.alloc()
	if err != nil {
		return 0, err
	}
	d.groups[g] = &groupRef{id: id, refs: 1}
	return id, nil
}

func (d *Datapath) unrefGroup(fe servicemap.Frontend) {
	g := groupOf(fe)
	r, ok := d.groups[g]
	if !ok {
		return
	}
	if r.refs--; r.refs <= 0 {
		delete(d.groups, g)
		d.groupIDs.free(r.id)
	}
}

// adoptGroup records the affinity id an earlier agent gave s. It reports
// false when the port already has another id (a crash between two
// frontends' updates), so the caller rewrites s with the port's id.
func (d *Datapath) adoptGroup(s *Service) bool {
	g := groupOf(s.Frontend)
	if r, ok := d.groups[g]; ok {
		r.refs++
		return r.id == s.AffinityID
	}
	d.groupIDs.reserve(s.AffinityID)
	d.groups[g] = &groupRef{id: s.AffinityID, refs: 1}
	return true
}
