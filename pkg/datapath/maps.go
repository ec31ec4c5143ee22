package datapath

import (
	"math"
	"reflect"
	"unsafe"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// object is a compiled BPF object of bpf/c that creates maps.
type object string

const (
	// objHooks is socklb.c: its maps hold the state, pinned under maps/
	// and adopted by the next agent. Every other object includes maps.h
	// and is handed these instead of creating its own.
	objHooks object = "socklb.c"
	// objSockterm is sockterm.c: its own maps are scratch space of one
	// agent process and are never pinned.
	objSockterm object = "sockterm.c"
	// objNodeport is nodeport.c, the per-packet path on the devices: its
	// own maps (per-CPU scratch space, the ports of datagrams being
	// fragmented) are never pinned.
	objNodeport object = "nodeport.c"
)

// mapDef is what the agent adds to a map's C definition: who creates it,
// how big, which flag to raise when it fills up, and the Go types the
// agent reads and writes it with.
type mapDef struct {
	name  string // the C name, also the pin name under maps/
	owner object
	// size is the capacity from the agent's configuration; nil when C fixes
	// it (an array indexed by an enum, socket-local storage). The C
	// default must be size(defaults): TestMapTable checks it.
	size func(Config) uint32
	flag string // the flag behind size, named in "map is full" errors
	// fromAPI: Apply fills the map from the API's state, so a migration
	// may refill it instead of copying it.
	fromAPI bool
	// fill orders the fromAPI maps for a batch fill: a reader goes
	// services -> slots -> backends (stats, members beside them), so
	// lower numbers are written first and services last.
	fill int
	// perEntry: a fromAPI map the batch fill leaves to per-entry writes
	// (an LPM trie has no batch update).
	perEntry bool
	// key and value are zero values of the Go types used with the map (a
	// per-CPU map's value: one CPU's); TestMapTable checks their layout
	// against the map's BTF.
	key, value any
}

// mapTable is every map of the objects the agent loads. Adding a map to
// bpf/c means adding its row here; sizing, "map is full" errors and the
// BTF check follow from it, and the agent reads or dumps it once it is a
// field of tables.
var mapTable = []mapDef{
	{name: socklbbpf.SocklbMapServices, owner: objHooks, fromAPI: true, fill: 6, size: maxServices, flag: "--max-services",
		key: socklbbpf.SocklbSvcKey{}, value: socklbbpf.SocklbSvcValue{}},
	{name: socklbbpf.SocklbMapSvcNames, owner: objHooks, fromAPI: true, fill: 5, size: maxServices, flag: "--max-services",
		key: uint32(0), value: socklbbpf.SocklbSvcName{}},
	// A slot per endpoint of each frontend, where backends has one per
	// endpoint of a Service port (a NodePort's share its ClusterIP's);
	// a frontend being switched holds two generations for a moment.
	{name: socklbbpf.SocklbMapSlots, owner: objHooks, fromAPI: true, fill: 4, size: maxSlots, flag: "--max-backends",
		key: socklbbpf.SocklbSlotKey{}, value: socklbbpf.SocklbSlotValue{}},
	{name: socklbbpf.SocklbMapBackends, owner: objHooks, fromAPI: true, fill: 2, size: maxBackends, flag: "--max-backends",
		key: uint32(0), value: socklbbpf.SocklbBackend{}},
	// Indexed by backend id, which runs up to twice --max-backends.
	{name: socklbbpf.SocklbMapStats, owner: objHooks, fromAPI: true, fill: 1, size: statsSlots, flag: "--max-backends",
		key: uint32(0), value: socklbbpf.SocklbBackendStats{}},
	// Per frontend, as slots are (for the frontends whose members are read).
	{name: socklbbpf.SocklbMapMembers, owner: objHooks, fromAPI: true, fill: 3, size: maxSlots, flag: "--max-backends",
		key: socklbbpf.SocklbMemberKey{}, value: uint32(0)},
	{name: socklbbpf.SocklbMapAffinity, owner: objHooks, size: func(c Config) uint32 { return c.MaxAffinity }, flag: "--max-affinity",
		key: socklbbpf.SocklbAffinityKey{}, value: socklbbpf.SocklbAffinityValue{}},
	// Connected TCP sockets translated and still open, by cookie (an LRU).
	{name: socklbbpf.SocklbMapSockConns, owner: objHooks, size: func(c Config) uint32 { return c.MaxSockets }, flag: "--max-sockets",
		key: uint64(0), value: socklbbpf.SocklbSockEntry{}},
	{name: socklbbpf.SocklbMapSkState, owner: objHooks,
		key: int32(0), value: socklbbpf.SocklbSockState{}},
	{name: socklbbpf.SocklbMapSockEvents, owner: objHooks,
		key: uint32(0), value: uint64(0)},
	// The cluster's other nodes' addresses: fixed in C, far above any
	// cluster's size (5 000 nodes, a few addresses each).
	{name: socklbbpf.SocklbMapNodeAddrs, owner: objHooks,
		key: socklbbpf.SocklbNodeAddrKey{}, value: socklbbpf.SocklbNodeAddrFlag(0)},
	// A range per frontend and prefix: far fewer than frontends, in practice.
	{name: socklbbpf.SocklbMapSrcRanges, owner: objHooks, fromAPI: true, perEntry: true, size: maxServices, flag: "--max-services",
		key: socklbbpf.SocklbSrcRangeKey{}, value: uint8(0)},
	// Two entries a flow: its client's direction and its replies'.
	{name: socklbbpf.SocklbMapFlows, owner: objHooks, size: func(c Config) uint32 { return 2 * c.MaxFlows }, flag: "--max-flows",
		key: socklbbpf.SocklbFlowKey{}, value: socklbbpf.SocklbFlowValue{}},
	{name: socklbbpf.SocklbMapNatDevs, owner: objHooks,
		key: uint32(0), value: socklbbpf.SocklbNatDev{}},
	{name: socklbbpf.SocklbMapFlowEvents, owner: objHooks,
		key: uint32(0), value: uint64(0)},
	{name: socklbbpf.NodeportMapScratch, owner: objNodeport,
		key: uint32(0), value: socklbbpf.NodeportScratchSpace{}},
	// Datagrams being fragmented through the node: fixed in C, an LRU.
	{name: socklbbpf.NodeportMapFragPorts, owner: objNodeport,
		key: socklbbpf.NodeportFragKey{}, value: socklbbpf.NodeportFragValue{}},
	// One walk's targets are the backends one Apply retired: at most every
	// backend, so sized like backends the writes never fail. A flag of
	// its own would be one more number users could get wrong.
	{name: socklbbpf.SocktermMapSockTargets, owner: objSockterm, size: maxBackends, flag: "--max-backends",
		key: socklbbpf.SocktermSockTarget{}, value: uint8(0)},
	{name: socklbbpf.SocktermMapSockDestroyed, owner: objSockterm,
		key: uint32(0), value: uint64(0)},
}

// serviceMaps are the maps Apply fills from the API's state.
func serviceMaps() []string {
	var out []string
	for _, d := range mapTable {
		if d.fromAPI {
			out = append(out, d.name)
		}
	}
	return out
}

// mapFlags names the flag that sizes each map, for errors.
func mapFlags() map[string]string {
	out := map[string]string{}
	for _, d := range mapTable {
		if d.flag != "" {
			out[d.name] = d.flag
		}
	}
	return out
}

func maxServices(c Config) uint32 { return c.MaxServices }
func maxBackends(c Config) uint32 { return c.MaxBackends }
func maxSlots(c Config) uint32    { return 2 * c.MaxBackends }

// statsSlots is the stats array's length: a slot for every backend id
// the allocator may hand out (newIDAllocator: 1 .. 2 * max).
func statsSlots(c Config) uint32 {
	n := 2*uint64(c.MaxBackends) + 1
	if n > math.MaxUint32 {
		n = math.MaxUint32
	}
	return uint32(n)
}

// mapDefOf returns the row of the map called name.
func mapDefOf(name string) (mapDef, bool) {
	for _, d := range mapTable {
		if d.name == name {
			return d, true
		}
	}
	return mapDef{}, false
}

// applySizes sets each map's capacity from cfg. Every object that shares
// the maps (the hooks, the socket iterators, the test-run wrappers) must
// agree on them, or the shared maps would not replace theirs.
func applySizes(maps map[string]*ebpf.MapSpec, cfg Config) {
	for _, d := range mapTable {
		if ms, ok := maps[d.name]; ok && d.size != nil {
			ms.MaxEntries = d.size(cfg)
		}
	}
}

// mapFields returns a pointer to each *ebpf.Map field of the struct v
// points at, by its `ebpf` tag, the way bpf2go's structs name their maps:
// tables and SocklbMaps are filled by name instead of by another list.
func mapFields(v any) map[string]**ebpf.Map {
	out := map[string]**ebpf.Map{}
	s := reflect.ValueOf(v).Elem()
	for i := 0; i < s.NumField(); i++ {
		f := s.Field(i)
		name := s.Type().Field(i).Tag.Get("ebpf")
		if name == "" || f.Type() != reflect.TypeOf((*ebpf.Map)(nil)) {
			continue
		}
		// NewAt reaches tables' unexported fields, which Addr refuses.
		out[name] = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Interface().(**ebpf.Map)
	}
	return out
}

// stateMaps is every pinned map of m by its pin name, for repair and for
// objects (the socket iterators, the test-run wrappers) that include
// maps.h and must use the agent's maps instead of creating their own.
func stateMaps(m *socklbbpf.SocklbMaps) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	for name, p := range mapFields(m) {
		if *p != nil && isStateMap(name) {
			out[name] = *p
		}
	}
	return out
}
