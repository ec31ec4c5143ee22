package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// Cleanup removes everything socklb pinned under bpffs. Unpinning a link
// drops the last reference to it, which detaches its program from the
// cgroup. It removes only names socklb creates, so a wrong --bpffs-path
// cannot delete someone else's pins.
func Cleanup(bpffs string) error {
	if err := (Config{BPFFSPath: bpffs}).validatePaths(); err != nil {
		return err
	}
	var errs []error
	rm := func(path string) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", path, err))
		}
	}
	for _, h := range hooks {
		rm(filepath.Join(linksDir(bpffs), h.name))
	}
	spec, err := socklbbpf.LoadSocklb()
	if err != nil {
		return fmt.Errorf("reading embedded BPF object: %w", err)
	}
	for name := range spec.Maps {
		if !isStateMap(name) {
			continue
		}
		rm(filepath.Join(mapsDir(bpffs), name))
	}
	rm(linksDir(bpffs))
	rm(mapsDir(bpffs))
	rm(bpffs)
	return errors.Join(errs...)
}
