package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// A migration moves the hooks from the maps an earlier agent pinned (another
// layout, or other --max-* sizes) to maps in this binary's generation
// directory, with no moment where connects go untranslated: the new maps
// are built beside the old ones and filled while the pinned links still
// run the old programs on the old maps; then each link switches to a new
// program in one BPF_LINK_UPDATE, and only then are the old maps unpinned.
// Cilium does the same for its maps: a changed map is re-created beside
// the pinned one and the old pin removed once the new programs are
// attached (pkg/bpf, "commitMapPins").
//
// Each state map is, against its old self:
//   - kept: same layout and size; the same kernel object is pinned in the
//     new directory too (a hard link on bpffs), so nothing is lost, not even
//     the socket storage of live sockets;
//   - copied: same key and value types, another capacity; entries copied;
//   - fresh: another layout; it starts empty.
//
// The Service maps (services, slots, backends, members, svc_names, stats)
// hold ids that point into each other, so they move together: if any of
// them is fresh, all start empty and the agent's first Apply fills them
// from the API's state before the links switch (refill). Affinity is keyed
// by ids the refill reallocates, so it starts empty with them. Per-socket
// state (sk_state) is kept whenever its own layout is: its entries name
// endpoints, which the hooks check against members before use. When its
// layout changed, and the old one is the one this binary converts from,
// the new sk_state is fresh but the live sockets' entries are carried into
// it (skcarry.go): once before the links switch and once after.
type migration struct {
	from   generation   // the generation the links serve from
	older  []generation // every generation but the new one, unpinned at the end
	refill bool         // the links switch after the first Apply, not at load
	// linksSwitched: the cgroup links run this agent's programs; the
	// device links may not yet (attachDevices failed).
	linksSwitched bool

	kept, copied, fresh []string
	sources             map[string]*ebpf.Map // copied maps' old selves, closed after the copy

	carryFrom *ebpf.Map // the old sk_state, when its entries can be carried
	carrying  *carrier  // loaded once the new sk_state exists
	carryNote string    // what became of the sockets' state, for the log

	// unprogrammed holds the frontends the new maps lack: those the first
	// Apply failed, until an ApplyDelta programs or removes them. nil
	// until that Apply: the new maps are then still empty.
	unprogrammed map[servicemap.FrontendKey]bool
}

func (m *migration) String(to string) string {
	var s string
	switch {
	case m.refill:
		s = fmt.Sprintf("from %s to %s: kept %v, copied %v, refilled %v; the links switch after the first sync", m.from.dir, to, m.kept, m.copied, m.fresh)
	default:
		s = fmt.Sprintf("from %s to %s: kept %v, copied %v, new %v", m.from.dir, to, m.kept, m.copied, m.fresh)
	}
	if m.carryNote != "" {
		s += "; " + m.carryNote
	}
	return s
}

// prepareMigration looks for pinned generations other than newDir and, if
// there are any, readies newDir for loading: kept maps are pinned there,
// and the maps to copy are opened. It returns nil when there is nothing to
// migrate from.
func prepareMigration(bpffs, newDir string, maps map[string]*ebpf.MapSpec) (*migration, error) {
	gens, err := generations(bpffs)
	if err != nil {
		return nil, err
	}
	m := &migration{sources: map[string]*ebpf.Map{}}
	for _, g := range gens {
		if g.dir != newDir {
			m.older = append(m.older, g)
		}
	}
	if len(m.older) == 0 {
		return nil, nil
	}
	// The generation the hooks serve from holds the state to carry over;
	// without hooks, the newest.
	m.from = m.older[len(m.older)-1]
	if g, ok := serving(bpffs, m.older); ok {
		m.from = g
	}
	// A new directory beside older ones is what a migration that did not
	// finish left; it may be half filled, so it is built again.
	if err := removeGeneration(generation{dir: newDir}); err != nil {
		return nil, fmt.Errorf("removing the unfinished generation %s: %w", newDir, err)
	}
	if err := ensurePinDir(newDir); err != nil {
		return nil, err
	}
	olds := map[string]*ebpf.Map{}
	defer func() {
		for _, o := range olds {
			o.Close()
		}
	}()
	kind := map[string]string{}
	for name, ms := range maps {
		if !isStateMap(name) {
			continue
		}
		want, err := specLayout(ms)
		if err != nil {
			return nil, err
		}
		old, err := ebpf.LoadPinnedMap(filepath.Join(m.from.dir, name), nil)
		switch {
		case errors.Is(err, os.ErrNotExist):
			kind[name] = "fresh"
			continue
		case err != nil:
			return nil, fmt.Errorf("opening the pinned map %s to migrate it: %w", filepath.Join(m.from.dir, name), err)
		}
		olds[name] = old
		switch have := pinnedLayout(old); {
		case have == want:
			kind[name] = "kept"
		case have.sameShape(want):
			kind[name] = "copied"
		default:
			kind[name] = "fresh"
		}
	}
	for _, name := range serviceMaps() {
		if kind[name] == "fresh" {
			m.refill = true
		}
	}
	if m.refill {
		for _, name := range append(serviceMaps(), socklbbpf.SocklbMapAffinity) {
			kind[name] = "fresh"
		}
	}
	for name, k := range kind {
		switch k {
		case "kept":
			if err := os.Link(filepath.Join(m.from.dir, name), filepath.Join(newDir, name)); err != nil {
				return nil, fmt.Errorf("pinning map %s in the new generation %s: %w", name, newDir, err)
			}
			m.kept = append(m.kept, name)
		case "copied":
			m.sources[name] = olds[name]
			delete(olds, name)
			m.copied = append(m.copied, name)
		default:
			m.fresh = append(m.fresh, name)
		}
	}
	if old := olds[socklbbpf.SocklbMapSkState]; old != nil && kind[socklbbpf.SocklbMapSkState] == "fresh" {
		ok, why, err := canCarry(old)
		switch {
		case err != nil:
			return nil, err
		case ok:
			m.carryFrom = old
			delete(olds, socklbbpf.SocklbMapSkState)
		default:
			m.carryNote = "live sockets' sk_state not carried: " + why
		}
	}
	return m, nil
}

// copyEntries fills the new maps of a size change from their old selves.
// The old maps are no longer written by any agent (this one holds the
// lock), only by the hooks: counters and affinity a hook writes during
// the copy are lost, as a restart of kube-proxy loses its `recent` lists.
func (m *migration) copyEntries(dst map[string]*ebpf.Map, flag map[string]string) error {
	defer m.closeSources()
	for name, src := range m.sources {
		d, ok := dst[name]
		if !ok {
			return fmt.Errorf("no new map %s to copy into", name)
		}
		if err := copyMap(src, d); err != nil {
			if f := flag[name]; f != "" {
				return fmt.Errorf("copying map %s into its new size (%d entries): %w; the hooks keep serving from %s: raise %s, or start with the earlier value", name, d.MaxEntries(), err, m.from.dir, f)
			}
			return fmt.Errorf("copying map %s into its new size: %w", name, err)
		}
	}
	return nil
}

func (m *migration) closeSources() {
	for _, s := range m.sources {
		s.Close()
	}
	m.sources = nil
}

func copyMap(src, dst *ebpf.Map) error {
	if src.Type() == ebpf.Array {
		return copyArray(src, dst)
	}
	var key []byte
	if src.Type() == ebpf.PerCPUHash || src.Type() == ebpf.PerCPUArray || src.Type() == ebpf.LRUCPUHash {
		var val [][]byte
		it := src.Iterate()
		for it.Next(&key, &val) {
			if err := dst.Put(key, val); err != nil {
				return err
			}
		}
		return it.Err()
	}
	var val []byte
	it := src.Iterate()
	for it.Next(&key, &val) {
		if err := dst.Put(key, val); err != nil {
			return err
		}
	}
	return it.Err()
}

// copyArray copies the slots of an array that hold anything and fit in
// dst: every slot of an array exists, zeroed (a million of them for the
// stats array), and one past dst's end is a backend id the smaller maps'
// allocator no longer hands out, whose counts are dropped.
func copyArray(src, dst *ebpf.Map) error {
	vsize := int(src.ValueSize())
	keys := make([]uint32, batchSize)
	vals := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(vsize, reflect.TypeOf(byte(0)))), batchSize, batchSize)
	zero := make([]byte, vsize)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := src.BatchLookup(&cursor, keys, vals.Interface(), nil)
		for i := 0; i < n; i++ {
			v := vals.Index(i).Slice(0, vsize).Bytes()
			if keys[i] >= dst.MaxEntries() || bytes.Equal(v, zero) {
				continue
			}
			if err := dst.Put(keys[i], v); err != nil {
				return err
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// prepareCarry loads the iterators that carry the live sockets' sk_state
// into the new map; carry runs them. A failure costs only that state, as
// before carrying existed, so it is noted and the migration goes on.
func (m *migration) prepareCarry(objs *socklbbpf.SocklbMaps, cgroup string) {
	if m.carryFrom == nil {
		return
	}
	if cgroup == "" {
		// No hooks, so no socket has state to carry.
		m.carryFrom.Close()
		m.carryFrom = nil
		return
	}
	c, err := newCarrier(m.carryFrom, objs.SkState, objs.Services, cgroup)
	if err != nil {
		m.carryFrom.Close()
	}
	m.carryFrom = nil
	if err != nil {
		m.carryNote = "live sockets' sk_state not carried: " + err.Error()
		return
	}
	m.carrying = c
	m.carryNote = "live sockets' sk_state carried at the switch"
}

// carry walks the sockets once before the links switch, when the new
// Service maps are complete (the carried entries take their ids).
func (m *migration) carry() {
	if m.carrying == nil {
		return
	}
	n, err := m.carrying.walk()
	if err != nil {
		m.carryNote = fmt.Sprintf("live sockets' sk_state carried for %d sockets, with errors: %v", n, err)
		return
	}
	m.carryNote = fmt.Sprintf("carried sk_state of %d sockets", n)
}

// switched is called once every link runs the new programs. Sockets the
// old programs gave state between the first carry and the switch are
// carried by a second walk; then the older generations go.
func (m *migration) switched() error {
	if m.carrying != nil {
		// A failed walk costs the sockets it missed their state, as an
		// upgrade did before carrying: said in the note, not returned,
		// which would fail /healthz until the agent restarts.
		if _, err := m.carrying.walk(); err != nil {
			m.carryNote += fmt.Sprintf("; carrying sk_state after the switch: %v", err)
		}
		m.carrying.Close()
		m.carrying = nil
	}
	return m.dropOlder()
}

// dropOlder unpins every earlier generation. Its maps die with their last
// reference: the old programs, which the link updates released.
func (m *migration) dropOlder() error {
	var errs []error
	for _, g := range m.older {
		errs = append(errs, removeGeneration(g))
	}
	return errors.Join(errs...)
}

// abandon undoes prepareMigration and the load after a failure, so the
// earlier generation stays the only one and keeps serving.
func (m *migration) abandon(newDir string) {
	m.closeSources()
	if m.carrying != nil {
		m.carrying.Close()
		m.carrying = nil
	}
	if m.carryFrom != nil {
		m.carryFrom.Close()
		m.carryFrom = nil
	}
	_ = removeGeneration(generation{dir: newDir})
}

// finishMigration switches the links to this agent's programs once the
// first Apply has filled the new maps, then drops the older generations.
// Called with d.mu held, after an Apply or ApplyDelta. A failure leaves the hooks
// on the complete old maps rather than on new ones missing frontends.
func (d *Datapath) finishMigration(applied bool) string {
	if d.pending == nil {
		return ""
	}
	if !applied {
		d.pendingErr = fmt.Errorf("the maps of the new layout under %s do not hold every frontend yet, so the hooks still serve from %s; "+
			"fix the failed frontends (raise the --max-* flag they name) or restart with the earlier flags", d.pinDir, d.pending.from.dir)
		return ""
	}
	d.pending.carry()
	if err := attachHooks(d.cfg, &d.objs.SocklbPrograms, d.ranged > 0); err != nil {
		d.pendingErr = fmt.Errorf("switching the hooks to the maps under %s: %w", d.pinDir, err)
		return ""
	}
	d.pending.linksSwitched, d.egressOn = true, d.ranged > 0
	if d.nodeport != nil {
		if err := d.attachDevices(); err != nil {
			d.pendingErr = fmt.Errorf("switching the devices' programs to the maps under %s: %w", d.pinDir, err)
			return ""
		}
	}
	d.pendingErr = d.pending.switched()
	done := "the hooks switched to " + d.pinDir
	if d.pending.carryNote != "" {
		done += "; " + d.pending.carryNote
	}
	d.pending = nil
	return done
}

// finishAfterApply notes what the Apply of the whole state left
// unprogrammed and switches the links when that is nothing.
func (d *Datapath) finishAfterApply(res ApplyResult) string {
	if d.pending == nil {
		return ""
	}
	d.pending.unprogrammed = map[servicemap.FrontendKey]bool{}
	for k := range res.Failed {
		d.pending.unprogrammed[k] = true
	}
	return d.finishMigration(len(res.Failed) == 0)
}

// finishAfterDelta switches the links once deltas have programmed or
// removed every frontend the first Apply failed. Every sync after the
// first is a delta (the agent's retries of failed frontends too): waiting
// for the next full Apply, the periodic resync, would leave the hooks that
// long on old maps no Apply writes any more.
func (d *Datapath) finishAfterDelta(delta servicemap.Delta, res ApplyResult) string {
	if d.pending == nil || d.pending.unprogrammed == nil {
		return ""
	}
	for _, k := range delta.Remove {
		delete(d.pending.unprogrammed, k)
	}
	for k := range delta.Upsert {
		delete(d.pending.unprogrammed, k)
	}
	for k := range res.Failed {
		d.pending.unprogrammed[k] = true
	}
	return d.finishMigration(len(d.pending.unprogrammed) == 0)
}

// linksPinned says whether an earlier agent left links to switch.
func linksPinned(bpffs string) bool {
	for _, h := range hooks {
		if _, err := os.Lstat(filepath.Join(linksDir(bpffs), h.name)); err == nil {
			return true
		}
	}
	return false
}

// loadGeneration loads spec with its maps pinned in the generation
// directory of their layout, migrating from an older generation if one
// is pinned.
func loadGeneration(cfg Config, spec *ebpf.CollectionSpec, setRetval bool) (*socklbbpf.SocklbObjects, string, *migration, error) {
	version, err := layoutVersion(spec.Maps)
	if err != nil {
		return nil, "", nil, err
	}
	dir := generationDir(cfg.BPFFSPath, version)
	mig, err := prepareMigration(cfg.BPFFSPath, dir, spec.Maps)
	if err != nil {
		return nil, "", nil, err
	}
	if err := ensurePinDir(dir); err != nil {
		return nil, "", nil, err
	}
	objs, err := loadSpec(cfg, spec, dir, setRetval)
	if err != nil {
		if mig != nil {
			mig.abandon(dir)
		}
		return nil, "", nil, err
	}
	if mig != nil {
		if err := mig.copyEntries(stateMaps(&objs.SocklbMaps), mapFlags()); err != nil {
			objs.Close()
			mig.abandon(dir)
			return nil, "", nil, err
		}
		mig.prepareCarry(&objs.SocklbMaps, cfg.CgroupPath)
	}
	return objs, dir, mig, nil
}
