package datapath

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"k8s.io/apimachinery/pkg/types"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// tables are the maps the agent reads and writes, by their names in
// mapTable; the hook programs are not needed to read state, so inspect and
// adoption share this.
type tables struct {
	services *ebpf.Map `ebpf:"services"`
	slots    *ebpf.Map `ebpf:"slots"`
	backends *ebpf.Map `ebpf:"backends"`
	stats    *ebpf.Map `ebpf:"stats"`
	svcNames *ebpf.Map `ebpf:"svc_names"`
	affinity *ebpf.Map `ebpf:"affinity"`
	members  *ebpf.Map `ebpf:"members"`
	// The per-packet path's, and the node addresses both paths read.
	srcRanges  *ebpf.Map `ebpf:"src_ranges"`
	nodeAddrs  *ebpf.Map `ebpf:"node_addrs"`
	flows      *ebpf.Map `ebpf:"flows"`
	natDevs    *ebpf.Map `ebpf:"nat_devs"`
	flowEvents *ebpf.Map `ebpf:"flow_events"`
}

func tablesOf(m *socklbbpf.SocklbMaps) tables {
	var t tables
	loaded := stateMaps(m)
	for name, dst := range mapFields(&t) {
		*dst = loaded[name]
	}
	return t
}

// Service is one programmed frontend as the maps hold it.
type Service struct {
	Frontend   servicemap.Frontend
	ID         uint32
	Generation uint32
	// AffinityID is shared by every frontend of the same Service port.
	AffinityID uint32
	BackendIDs []uint32 // parallel to Frontend.Backends
	// Broken is set when a slot or backend the live generation points at
	// is missing: the next Apply rewrites the service.
	Broken bool
}

// readServices reconstructs every programmed frontend from the maps.
func readServices(t tables) (map[servicemap.FrontendKey]*Service, error) {
	out := map[servicemap.FrontendKey]*Service{}
	ranges, err := readRanges(t)
	if err != nil {
		return nil, err
	}
	var (
		k socklbbpf.SocklbSvcKey
		v socklbbpf.SocklbSvcValue
	)
	it := t.services.Iterate()
	for it.Next(&k, &v) {
		key := servicemap.FrontendKey{
			Addr:  addrFromBytes(k.Addr),
			Port:  portFromMap(k.Port),
			Proto: servicemap.Protocol(k.Proto),
			Scope: servicemap.Scope(k.Scope),
		}
		s := &Service{ID: v.SvcId, Generation: v.Generation, AffinityID: v.AffinityId}
		s.Frontend.Key = key
		s.Frontend.Kind = kindFromMap(v.Kind)
		s.Frontend.Affinity = time.Duration(v.AffinityTimeout) * time.Second
		s.Frontend.PolicyDrop = v.Flags&socklbbpf.SocklbSvcFlagSVC_F_POLICY_DROP != 0
		s.Frontend.LocalOnly = v.Flags&socklbbpf.SocklbSvcFlagSVC_F_LOCAL != 0
		s.Frontend.LocalNodeOnly = v.Flags&socklbbpf.SocklbSvcFlagSVC_F_LOCAL_NODE_ONLY != 0
		if v.Flags&socklbbpf.SocklbSvcFlagSVC_F_SRC_RANGES != 0 {
			s.Frontend.SourceRanges = ranges[v.SvcId]
		}
		var name socklbbpf.SocklbSvcName
		if err := t.svcNames.Lookup(v.SvcId, &name); err == nil {
			s.Frontend.Service, s.Frontend.PortName = parseSvcName(cString(name.Name[:]))
		}
		for slot := uint32(0); slot < v.Count; slot++ {
			var sv socklbbpf.SocklbSlotValue
			var be socklbbpf.SocklbBackend
			sk := socklbbpf.SocklbSlotKey{SvcId: v.SvcId, Generation: v.Generation, Slot: slot}
			if err := t.slots.Lookup(sk, &sv); err != nil {
				s.Broken = true
				continue
			}
			id := sv.BackendId
			if err := t.backends.Lookup(id, &be); err != nil {
				s.Broken = true
				continue
			}
			s.BackendIDs = append(s.BackendIDs, id)
			s.Frontend.Backends = append(s.Frontend.Backends, servicemap.Backend{Addr: addrFromBytes(be.Addr), Port: portFromMap(be.Port)})
		}
		sortBackends(s)
		out[key] = s
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading services map: %w", err)
	}
	return out, nil
}

func sortBackends(s *Service) {
	idx := make([]int, len(s.BackendIDs))
	for i := range idx {
		idx[i] = i
	}
	less := func(a, b servicemap.Backend) bool {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		return a.Port < b.Port
	}
	sort.Slice(idx, func(i, j int) bool { return less(s.Frontend.Backends[idx[i]], s.Frontend.Backends[idx[j]]) })
	bes := make([]servicemap.Backend, len(idx))
	ids := make([]uint32, len(idx))
	for i, j := range idx {
		bes[i], ids[i] = s.Frontend.Backends[j], s.BackendIDs[j]
	}
	s.Frontend.Backends, s.BackendIDs = bes, ids
}

// backendCounters reads a backend's counters, its id's slot of the stats
// array; pins an agent from before the array left (a per-CPU hash) are
// summed over the CPUs, so inspect reads either across an upgrade.
func backendCounters(t tables, id uint32) (connects, datagrams uint64, err error) {
	if t.stats.Type() == ebpf.PerCPUHash {
		var per []socklbbpf.SocklbBackendStats
		if err := t.stats.Lookup(id, &per); err != nil {
			return 0, 0, err
		}
		for _, p := range per {
			connects += p.Connects
			datagrams += p.Datagrams
		}
		return connects, datagrams, nil
	}
	var c socklbbpf.SocklbBackendStats
	if err := t.stats.Lookup(id, &c); err != nil {
		return 0, 0, err
	}
	return c.Connects, c.Datagrams, nil
}

func svcName(fe servicemap.Frontend) string {
	return fe.Service.String() + ":" + fe.PortName
}

func parseSvcName(s string) (types.NamespacedName, string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return types.NamespacedName{}, ""
	}
	ns, name, _ := strings.Cut(s[:i], "/")
	return types.NamespacedName{Namespace: ns, Name: name}, s[i+1:]
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
