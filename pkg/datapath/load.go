package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// loadObjects loads the hook programs and creates the maps, or adopts the
// maps an earlier agent pinned under dir/maps so their state survives.
func loadObjects(cfg Config, setRetval bool) (*socklbbpf.SocklbObjects, error) {
	if err := ensureBPFFS(cfg.BPFFSPath); err != nil {
		return nil, err
	}
	if err := ensurePinDir(mapsDir(cfg.BPFFSPath)); err != nil {
		return nil, err
	}
	spec, err := socklbbpf.LoadSocklb()
	if err != nil {
		return nil, fmt.Errorf("reading embedded BPF object: %w", err)
	}
	applySizes(spec.Maps, cfg)
	for name, ms := range spec.Maps {
		// .rodata holds load-time constants, which belong to one program
		// load, not to the state a restart must keep.
		if isStateMap(name) {
			ms.Pinning = ebpf.PinByName
		}
	}
	if err := setConstants(spec, cfg, setRetval); err != nil {
		return nil, err
	}
	var objs socklbbpf.SocklbObjects
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
		Maps: ebpf.MapOptions{PinPath: mapsDir(cfg.BPFFSPath)},
	})
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return nil, fmt.Errorf("maps pinned under %s were made with other sizes or an older layout (%w); "+
			"start with the same --max-* flags, or run `socklb cleanup --bpffs-path %s` and restart (connections to Services fail until the agent has reprogrammed them)",
			mapsDir(cfg.BPFFSPath), err, cfg.BPFFSPath)
	}
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("loading BPF programs: the kernel's verifier refused them: %+v", verr)
		}
		return nil, fmt.Errorf("loading BPF programs and maps (needs root or CAP_BPF+CAP_NET_ADMIN, and a kernel with cgroup BPF): %w", err)
	}
	return &objs, nil
}

// isStateMap tells the maps that hold socklb's state (pinned, adopted,
// removed by Cleanup) from the loader's internal .rodata/.bss.
func isStateMap(name string) bool { return !strings.HasPrefix(name, ".") }
