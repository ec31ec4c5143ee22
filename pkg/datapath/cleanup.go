package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CleanupResult says what Cleanup could not take away. Under --force a
// running agent checks its pins on a timer and puts back what it finds
// missing, possibly while Cleanup is still removing directories, as
// kube-proxy re-adds its chains at its next sync after
// `kube-proxy --cleanup`.
type CleanupResult struct {
	// Holder names the agent that held the pin directory ("pid N, comm"),
	// or is empty when none did.
	Holder string
	// PutBack lists the directories Holder filled again with socklb's own
	// pins while Cleanup ran.
	PutBack []string
}

// testAfterUnpin, when set by a test, runs between removing the pins and
// removing their directories: where a running agent's re-pinning lands.
var testAfterUnpin func()

// Cleanup removes everything socklb pinned under bpffs. Unpinning a link
// drops the last reference to it, which detaches its program from the
// cgroup. It removes only names socklb creates, so a wrong --bpffs-path
// cannot delete someone else's pins.
//
// While an agent holds the pin directory Cleanup refuses, unless force:
// it would detach the hooks of a running agent, whose /healthz would go on
// answering 200 until it noticed.
func Cleanup(bpffs string, force bool) (CleanupResult, error) {
	var res CleanupResult
	if err := (Config{BPFFSPath: bpffs}).validatePaths(); err != nil {
		return res, err
	}
	lock, err := tryLock(bpffs)
	switch {
	case errors.Is(err, errLocked) && !force:
		return res, fmt.Errorf("a socklb agent (%s) holds %s and serves from it: removing its pins would detach its hooks under it. "+
			"Stop the agent first, or pass --force to remove them anyway", lockHolder(bpffs), bpffs)
	case errors.Is(err, errLocked):
		res.Holder = lockHolder(bpffs)
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return res, err
	}
	defer lock.release()
	names, err := stateMapNames()
	if err != nil {
		return res, err
	}
	var errs []error
	rm := func(path string) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", path, err))
		}
	}
	// A directory the running agent filled again is its doing, not a
	// failure; anything else left in it is not socklb's and is named.
	rmDir := func(path, what string) {
		err := os.Remove(path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if errors.Is(err, unix.ENOTEMPTY) {
			foreign, lerr := foreignEntries(path, names)
			switch {
			case lerr != nil:
				err = errors.Join(err, lerr)
			case len(foreign) == 0 && res.Holder != "":
				res.PutBack = append(res.PutBack, path)
				return
			case len(foreign) > 0:
				what = fmt.Sprintf(" (it holds %s, which socklb does not pin: move it away)", strings.Join(foreign, ", "))
			}
		}
		errs = append(errs, fmt.Errorf("removing %s%s: %w", path, what, err))
	}
	for _, h := range hooks {
		rm(filepath.Join(linksDir(bpffs), h.name))
	}
	errs = append(errs, removeDeviceLinks(bpffs, func(string) bool { return true }))
	gens, err := generations(bpffs)
	if err != nil {
		return res, err
	}
	for _, g := range gens {
		errs = append(errs, unpinGeneration(g))
	}
	rm(filepath.Join(mapsDir(bpffs), grownPin))
	if testAfterUnpin != nil {
		testAfterUnpin()
	}
	for _, g := range gens {
		if !g.legacy {
			rmDir(g.dir, " (it holds something socklb did not pin?)")
		}
	}
	rmDir(linksDir(bpffs), "")
	rmDir(mapsDir(bpffs), "")
	rmDir(bpffs, "")
	return res, errors.Join(errs...)
}

// foreignEntries lists what dir holds besides the names socklb pins:
// links, state maps, generation directories and its two top directories.
func foreignEntries(dir string, stateMaps []string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	own := map[string]bool{"links": true, "maps": true, grownPin: true}
	for _, h := range hooks {
		own[h.name] = true
	}
	for _, n := range stateMaps {
		own[n] = true
	}
	var foreign []string
	for _, e := range entries {
		if !own[e.Name()] && !devPinName.MatchString(e.Name()) && !(e.IsDir() && generationName.MatchString(e.Name())) {
			foreign = append(foreign, filepath.Join(dir, e.Name()))
		}
	}
	return foreign, nil
}
