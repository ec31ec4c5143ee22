package servicemap

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Capacity is the room the datapath's maps have: service entries (one per
// frontend), backend entries (one per endpoint of each Service port,
// shared by its frontends), slot entries (one per endpoint of each
// frontend) and source range entries (one per loadBalancerSourceRanges
// prefix of each frontend).
type Capacity struct {
	Frontends, Backends, Slots, Ranges int
}

// Demand is what one Service's frontends ask of the maps.
type Demand struct {
	Service types.NamespacedName
	Created time.Time
	// Protected Services are admitted before any other: the cluster's
	// own (ProtectedServices).
	Protected                          bool
	Frontends, Backends, Slots, Ranges int
}

// ProtectedServices are admitted first whatever their age, and never
// refused: without the API server's Service and cluster DNS nothing else
// in the cluster works, so no tenant's Service may take their room, and if
// they alone do not fit, the node cannot serve and its syncs must fail.
var ProtectedServices = []types.NamespacedName{
	{Namespace: "default", Name: "kubernetes"},
	{Namespace: "kube-system", Name: "kube-dns"},
}

// Admit decides which Services the maps take when not all fit: protected
// Services first (always), then the oldest (creation time, then namespace/name). A
// Service is taken whole or not at all, since half of its ports working is
// harder to see than none; one that does not fit in what is left is
// refused, and the younger ones after it may still fit. The same demands
// give the same answer, so every node with the same maps refuses the same
// Services, and a tenant can only ever lose its own newest Services to its
// own growth. It returns the refused Services in that order.
func Admit(demands []Demand, room Capacity) (refused []Demand) {
	order := slices.Clone(demands)
	slices.SortFunc(order, func(a, b Demand) int {
		if a.Protected != b.Protected {
			if a.Protected {
				return -1
			}
			return 1
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Service.Namespace, b.Service.Namespace), cmp.Compare(a.Service.Name, b.Service.Name))
	})
	for _, d := range order {
		if d.Protected || d.Frontends <= room.Frontends && d.Backends <= room.Backends && d.Slots <= room.Slots && d.Ranges <= room.Ranges {
			room.Frontends -= d.Frontends
			room.Backends -= d.Backends
			room.Slots -= d.Slots
			room.Ranges -= d.Ranges
			continue
		}
		refused = append(refused, d)
	}
	return refused
}

// Demands lists what each Service of the current state asks of the maps,
// with its creation time: an O(frontends) walk, for when the state may
// not fit.
func (t *Tracker) Demands() []Demand {
	by := map[types.NamespacedName]*Demand{}
	for _, fe := range t.state {
		d := by[fe.Service]
		if d == nil {
			d = &Demand{Service: fe.Service, Protected: slices.Contains(ProtectedServices, fe.Service)}
			if e := t.entries[fe.Service]; e != nil {
				d.Backends = e.backendEntries
				if e.svc != nil {
					d.Created = e.svc.CreationTimestamp.Time
				}
			}
			by[fe.Service] = d
		}
		d.Frontends++
		d.Slots += len(fe.Backends)
		d.Ranges += len(fe.SourceRanges)
	}
	out := make([]Demand, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	return out
}
