package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// loadObjects loads the hook programs and creates the maps, or adopts the
// maps an earlier agent pinned in this layout's generation directory so
// their state survives; maps of another layout or size are migrated
// (migrate.go). It returns the generation directory and the migration in
// progress, if any.
func loadObjects(cfg Config, setRetval bool) (*socklbbpf.SocklbObjects, string, *migration, error) {
	if err := ensureBPFFS(cfg.BPFFSPath); err != nil {
		return nil, "", nil, err
	}
	if err := ensurePinDir(mapsDir(cfg.BPFFSPath)); err != nil {
		return nil, "", nil, err
	}
	spec, err := socklbbpf.LoadSocklb()
	if err != nil {
		return nil, "", nil, fmt.Errorf("reading embedded BPF object: %w", err)
	}
	applySizes(spec.Maps, cfg)
	applyTestLayoutChange(spec.Maps)
	return loadGeneration(cfg, spec, setRetval)
}

func loadSpec(cfg Config, spec *ebpf.CollectionSpec, dir string, setRetval bool) (*socklbbpf.SocklbObjects, error) {
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
	err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
		Maps: ebpf.MapOptions{PinPath: dir},
	})
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		// The directory is named after the layout, so only a hand-made
		// pin gets here.
		return nil, fmt.Errorf("a map pinned under %s does not have the layout its directory is named after (%w); "+
			"remove that directory (the agent rebuilds it from the older generation or the API) and restart", dir, err)
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
