package main

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// translateAlone times lb_translate without a socket: the SEC("syscall")
// wrapper pkg/datapath's tests run, loaded beside the live maps, run calls
// times on the measured ClusterIP. Set beside connect4's ns/call it splits
// the hook's cost into the map lookups (here) and what only a real socket
// costs (socket storage, the context, the netns cookie). The wrapper keeps
// its socket state in a hash instead of socket storage, and the syscall
// entry adds its own overhead: read it as an estimate.
func translateAlone(m *socklbbpf.SocklbMaps, calls int) (progStats, error) {
	spec, err := socklbbpf.LoadSocklbTest()
	if err != nil {
		return progStats{}, err
	}
	repl := map[string]*ebpf.Map{
		"services": m.Services, "slots": m.Slots, "backends": m.Backends, "stats": m.Stats,
		"members": m.Members, "affinity": m.Affinity, "sock_events": m.SockEvents,
		"sk_state": m.SkState, "svc_names": m.SvcNames, "sock_conns": m.SockConns,
	}
	// The replacements keep the sizes the run gave them (-maps).
	for name, mp := range repl {
		if ms, ok := spec.Maps[name]; ok && ms.Type != ebpf.SkStorage {
			ms.MaxEntries = mp.MaxEntries()
		}
	}
	var objs socklbbpf.SocklbTestObjects
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return progStats{}, fmt.Errorf("loading the test-run wrappers beside the datapath's maps: %w", err)
	}
	defer objs.Close()
	prog := objs.TestTranslateConnect

	var in socklbbpf.SocklbTestTestCtx
	v4 := measuredVIP.As4()
	in.Req.Addr[10], in.Req.Addr[11] = 0xff, 0xff
	copy(in.Req.Addr[12:], v4[:])
	// Network byte order in the field, as the kernel gives it.
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], vipTCPPort)
	in.Req.Port = binary.NativeEndian.Uint16(port[:])
	in.Req.Proto = 6
	before, err := prog.Stats()
	if err != nil {
		return progStats{}, err
	}
	var out socklbbpf.SocklbTestTestCtx
	for i := 0; i < calls; i++ {
		// Each call a socket of its own, as each connect is: cookies
		// cycle through 512, under the wrapper's 1024-entry hash.
		in.Req.Cookie = uint64(i%512 + 1)
		if _, err := prog.Run(&ebpf.RunOptions{Context: in, ContextOut: &out}); err != nil {
			return progStats{}, fmt.Errorf("BPF_PROG_TEST_RUN of test_translate_connect: %w", err)
		}
		if out.Verdict != socklbbpf.SocklbTestLbVerdictLB_XLATED {
			return progStats{}, fmt.Errorf("test_translate_connect on %s: verdict %d, want LB_XLATED", measuredVIP, out.Verdict)
		}
	}
	after, err := prog.Stats()
	if err != nil {
		return progStats{}, err
	}
	return progStats{
		RunTimeNS: uint64((after.Runtime - before.Runtime).Nanoseconds()),
		RunCount:  after.RunCount - before.RunCount,
	}, nil
}
