package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"

	"github.com/socklb/socklb/pkg/servicemap"
)

// BackendDump is one KUBE-SEP with its counters.
type BackendDump struct {
	ID        uint32
	Backend   servicemap.Backend
	Connects  uint64
	Datagrams uint64
	// NoCounter is set when the stats map has no entry for the backend:
	// the hooks translate to it without counting, so Connects and
	// Datagrams say nothing. The agent re-creates the entry when it
	// restarts (adopt).
	NoCounter bool `json:",omitempty"`
}

// ServiceDump is one KUBE-SVC chain as the live maps hold it.
type ServiceDump struct {
	Frontend   servicemap.Frontend
	ID         uint32
	Generation uint32
	Broken     bool
	Backends   []BackendDump
	// Via is set on a NodePort shown at one of this node's addresses: the
	// entry that serves it there, at the unspecified address, which
	// node_addrs leads the hooks to (one entry per port, whatever the
	// node's addresses).
	Via *servicemap.FrontendKey `json:",omitempty"`
}

// Dump reads the maps pinned under bpffs, without loading any program, in
// the order kube-proxy users read iptables-save: by address, port, protocol.
func Dump(bpffs string) ([]ServiceDump, error) {
	t, closeAll, err := openPinnedTables(bpffs)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	svcs, err := readServices(t)
	if err != nil {
		return nil, err
	}
	out := make([]ServiceDump, 0, len(svcs))
	for _, s := range svcs {
		sd := ServiceDump{Frontend: s.Frontend, ID: s.ID, Generation: s.Generation, Broken: s.Broken}
		for i, id := range s.BackendIDs {
			c, dg, err := backendCounters(t, id)
			missing := errors.Is(err, ebpf.ErrKeyNotExist)
			if err != nil && !missing {
				return nil, fmt.Errorf("reading counters of backend %d: %w", id, err)
			}
			sd.Backends = append(sd.Backends, BackendDump{ID: id, Backend: s.Frontend.Backends[i], Connects: c, Datagrams: dg, NoCounter: missing})
		}
		out = append(out, sd)
	}
	local, err := localNodeAddrs(t)
	if err != nil {
		return nil, err
	}
	out = append(out, atNodeAddrs(out, svcs, local)...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Frontend.Key, out[j].Frontend.Key
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Proto < b.Proto
	})
	return out, nil
}

// localNodeAddrs is this node's NodePort addresses in node_addrs.
func localNodeAddrs(t tables) ([]netip.Addr, error) {
	if t.nodeAddrs == nil {
		return nil, nil
	}
	var (
		k     socklbbpf.SocklbNodeAddrKey
		v     socklbbpf.SocklbNodeAddrFlag
		local []netip.Addr
	)
	it := t.nodeAddrs.Iterate()
	for it.Next(&k, &v) {
		if v&socklbbpf.SocklbNodeAddrFlagNODE_ADDR_LOCAL != 0 {
			local = append(local, addrFromBytes(k.Addr))
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading node_addrs: %w", err)
	}
	return local, nil
}

// atNodeAddrs shows each NodePort entry (at the unspecified address) at
// every address of this node it serves, as the hooks find it: where no
// frontend of the address itself comes first, and for packets from other
// machines (a ScopeExternal twin) not on loopback. A kube-proxy user asks
// what 192.168.1.5:30080 does; the answer is a line of its own.
func atNodeAddrs(dumps []ServiceDump, svcs map[servicemap.FrontendKey]*Service, local []netip.Addr) []ServiceDump {
	var out []ServiceDump
	for _, sd := range dumps {
		k := sd.Frontend.Key
		if sd.Frontend.Kind != servicemap.KindNodePort || !k.Addr.IsUnspecified() {
			continue
		}
		for _, a := range local {
			if a.Is4() != k.Addr.Is4() || k.Scope == servicemap.ScopeExternal && a.IsLoopback() {
				continue
			}
			if _, own := svcs[servicemap.FrontendKey{Addr: a, Port: k.Port, Proto: k.Proto}]; own {
				continue
			}
			at := sd
			via := k
			at.Frontend.Key.Addr, at.Via = a, &via
			out = append(out, at)
		}
	}
	return out
}

// sinceNodePorts are the maps that came with the per-packet path: older
// agents' pins lack them, and their readers take a missing one as empty.
var sinceNodePorts = map[string]bool{
	socklbbpf.SocklbMapSrcRanges: true, socklbbpf.SocklbMapNodeAddrs: true, socklbbpf.SocklbMapFlows: true,
	socklbbpf.SocklbMapNatDevs: true, socklbbpf.SocklbMapFlowEvents: true,
}

func openPinnedTables(bpffs string) (tables, func(), error) {
	dir, err := PinnedMapsDir(bpffs)
	if err != nil {
		return tables{}, nil, err
	}
	var opened []*ebpf.Map
	closeAll := func() {
		for _, m := range opened {
			m.Close()
		}
	}
	open := func(name string) (*ebpf.Map, error) {
		path := filepath.Join(dir, name)
		m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no socklb map pinned at %s: is the agent running with --bpffs-path %s? %w", path, bpffs, os.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("opening pinned map %s: %w", path, err)
		}
		opened = append(opened, m)
		return m, nil
	}
	var t tables
	for name, dst := range mapFields(&t) {
		m, err := open(name)
		if err != nil && sinceNodePorts[name] && errors.Is(err, os.ErrNotExist) {
			// Pinned by an agent from before the per-packet path: it has
			// no such map, and nothing of it to show.
			continue
		}
		if err != nil {
			closeAll()
			return tables{}, nil, err
		}
		*dst = m
	}
	return t, closeAll, nil
}
