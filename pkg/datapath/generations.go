package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// Maps are pinned per layout: <bpffs>/maps/<version>/<map>, the version
// from layoutVersion. Agents before versioned pins put them straight into
// <bpffs>/maps/<map>: that "legacy" generation is migrated like any other.
const generationPrefix = "v1-"

var generationName = regexp.MustCompile(`^v1-[0-9a-f]{12}$`)

// generation is one set of pinned maps.
type generation struct {
	dir    string
	legacy bool // pins straight in <bpffs>/maps, before versioning
	mtime  int64
}

func generationDir(bpffs, version string) string { return filepath.Join(mapsDir(bpffs), version) }

// stateMapNames are the maps socklb pins, by their C names. Parsed once:
// Cleanup must remove pins back to back, with no ELF parsing between them
// for a running agent's pin repair to slip into.
var stateMapNames = sync.OnceValues(func() ([]string, error) {
	spec, err := socklbbpf.LoadSocklb()
	if err != nil {
		return nil, fmt.Errorf("reading embedded BPF object: %w", err)
	}
	var names []string
	for name := range spec.Maps {
		if isStateMap(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
})

// generations lists the pinned generations, oldest first by when their
// maps were pinned.
func generations(bpffs string) ([]generation, error) {
	dir := mapsDir(bpffs)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing pinned maps in %s: %w", dir, err)
	}
	names, err := stateMapNames()
	if err != nil {
		return nil, err
	}
	state := map[string]bool{}
	for _, n := range names {
		state[n] = true
	}
	var gens []generation
	legacy := false
	for _, e := range entries {
		switch {
		case e.IsDir() && generationName.MatchString(e.Name()):
			gens = append(gens, generation{dir: filepath.Join(dir, e.Name())})
		case !e.IsDir() && state[e.Name()]:
			legacy = true
		}
	}
	if legacy {
		gens = append(gens, generation{dir: dir, legacy: true})
	}
	for i := range gens {
		gens[i].mtime = pinnedAt(gens[i].dir)
	}
	sort.SliceStable(gens, func(i, j int) bool { return gens[i].mtime < gens[j].mtime })
	return gens, nil
}

// pinnedAt is when a generation's services map was pinned (bpffs keeps
// an inode's times), or its directory's time without one.
func pinnedAt(dir string) int64 {
	for _, p := range []string{filepath.Join(dir, socklbbpf.SocklbMapServices), dir} {
		if fi, err := os.Stat(p); err == nil {
			return fi.ModTime().UnixNano()
		}
	}
	return 0
}

// serving finds the generation whose maps the pinned connect4 link's
// program uses: the one the hooks serve from, whatever the pins' ages say.
func serving(bpffs string, gens []generation) (generation, bool) {
	// Not ReadOnly: the kernel opens a pinned link read-write only
	// (bpf_obj_get_user answers EINVAL otherwise).
	l, err := link.LoadPinnedLink(filepath.Join(linksDir(bpffs), "connect4"), nil)
	if err != nil {
		return generation{}, false
	}
	defer l.Close()
	li, err := l.Info()
	if err != nil {
		return generation{}, false
	}
	prog, err := ebpf.NewProgramFromID(li.Program)
	if err != nil {
		return generation{}, false
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return generation{}, false
	}
	ids, _ := pi.MapIDs()
	for _, g := range gens {
		m, err := ebpf.LoadPinnedMap(filepath.Join(g.dir, socklbbpf.SocklbMapServices), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			continue
		}
		info, err := m.Info()
		m.Close()
		if err != nil {
			continue
		}
		if id, ok := info.ID(); ok && slices.Contains(ids, id) {
			return g, true
		}
	}
	return generation{}, false
}

// PinnedMapsDir is the directory holding the maps the hooks serve from, for
// readers (`socklb inspect`, bpftool, tests). While an agent migrates to a
// new layout two generations exist, and the older one still serves; with
// no hooks attached, the oldest is taken.
func PinnedMapsDir(bpffs string) (string, error) {
	gens, err := generations(bpffs)
	if err != nil {
		return "", err
	}
	if len(gens) == 0 {
		return "", fmt.Errorf("no socklb maps pinned under %s: is the agent running with --bpffs-path %s?", mapsDir(bpffs), bpffs)
	}
	if g, ok := serving(bpffs, gens); ok {
		return g.dir, nil
	}
	return gens[0].dir, nil
}

// removeGeneration unpins one generation's maps and removes its
// directory. A map still used by a program, or pinned in another
// generation too, lives on.
func removeGeneration(g generation) error {
	err := unpinGeneration(g)
	if !g.legacy {
		if rerr := os.Remove(g.dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing %s (it holds something socklb did not pin?): %w", g.dir, rerr))
		}
	}
	return err
}

// unpinGeneration removes the pins of one generation's maps, leaving its
// directory.
func unpinGeneration(g generation) error {
	names, err := stateMapNames()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		p := filepath.Join(g.dir, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
