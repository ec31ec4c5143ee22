package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Cleanup removes everything socklb pinned under bpffs. Unpinning a link
// drops the last reference to it, which detaches its program from the
// cgroup. It removes only names socklb creates, so a wrong --bpffs-path
// cannot delete someone else's pins.
//
// While an agent holds the pin directory Cleanup refuses, unless force:
// it would detach the hooks of a running agent, whose /healthz would go on
// answering 200 until it noticed.
func Cleanup(bpffs string, force bool) error {
	if err := (Config{BPFFSPath: bpffs}).validatePaths(); err != nil {
		return err
	}
	lock, err := tryLock(bpffs)
	switch {
	case errors.Is(err, errLocked) && !force:
		return fmt.Errorf("a socklb agent (%s) holds %s and serves from it: removing its pins would detach its hooks under it. "+
			"Stop the agent first, or pass --force to remove them anyway", lockHolder(bpffs), bpffs)
	case errors.Is(err, errLocked), errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	}
	defer lock.release()
	if _, err := stateMapNames(); err != nil {
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
	gens, err := generations(bpffs)
	if err != nil {
		return err
	}
	for _, g := range gens {
		errs = append(errs, removeGeneration(g))
	}
	rm(linksDir(bpffs))
	rm(mapsDir(bpffs))
	rm(bpffs)
	return errors.Join(errs...)
}
