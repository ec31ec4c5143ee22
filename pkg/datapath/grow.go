package datapath

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// The maps --max-services and --max-backends size grow in place when the
// agent's Services need more room, up to Config.GrowBudget: a migration
// like an upgrade's (migrate.go), run by the agent that holds the pins.
// The bigger maps are created beside the serving ones and filled with a
// copy of every entry while the hooks still serve the old ones; then each
// pinned link switches to the new programs in one BPF_LINK_UPDATE, the
// old generation is unpinned, and its maps die with the old programs. No
// connect meets a half-filled map. Maps whose size does not change (the
// affinity LRU, socket storage, flows) are the same kernel objects before
// and after. The one loss: per-backend counters bumped between the copy
// and the switch.
//
// A grown size outlives the agent: Grow pins a record (maps/grown), and
// while it is there Open takes, per map, the larger of the flag and the
// serving generation's size (adoptGrownSizes), so a restart neither
// shrinks maps that hold more than the flags would (the copy could fail,
// and the agent with it) nor grows them again. Once the flags reach the
// grown sizes the record goes and the flags own the sizes again; to
// shrink grown maps, `socklb cleanup` and restart.

// ErrBudget is wrapped by Grow's error when the budget stops the growth.
var ErrBudget = errors.New("map memory budget")

// Grow makes the maps big enough for want (each figure rounded up to a
// power of two, and at least double the current size), or as big as the
// budget allows, and returns the capacity they have afterwards. An error
// leaves the maps as they were, serving; its capacity is then the current
// one.
func (d *Datapath) Grow(want servicemap.Capacity) (servicemap.Capacity, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.capacity()
	if d.cfg.GrowBudget == 0 {
		return cur, fmt.Errorf("%w: the maps do not grow, --map-memory-budget is 0", ErrBudget)
	}
	if d.pending != nil {
		return cur, fmt.Errorf("a migration to %s waits for its maps to be filled; the maps grow once it is done", d.pinDir)
	}
	next, ok := grownConfig(d.cfg, want)
	if !ok {
		return cur, fmt.Errorf("%w: growing the maps for %d frontends, %d backends and %d slots would take about %d MiB of kernel memory, past --map-memory-budget (%d MiB); "+
			"raise it, or --max-services and --max-backends", ErrBudget, want.Frontends, want.Backends, want.Slots, mapMemory(sizedFor(d.cfg, want))>>20, d.cfg.GrowBudget>>20)
	}
	// Recorded first: a crash after the switch must not leave grown maps
	// that the next agent, sized by the flags, would shrink. A record of a
	// growth that then failed changes nothing (adoptGrownSizes).
	if err := writeGrown(d.cfg.BPFFSPath, next); err != nil {
		return cur, fmt.Errorf("recording the growth under %s: %w", mapsDir(d.cfg.BPFFSPath), err)
	}
	if err := d.reload(next); err != nil {
		return d.capacity(), fmt.Errorf("growing the maps to %d services and %d backends: %w", next.MaxServices, next.MaxBackends, err)
	}
	return d.capacity(), nil
}

func (d *Datapath) capacity() servicemap.Capacity {
	return servicemap.Capacity{Frontends: int(d.t.services.MaxEntries()), Backends: int(d.t.backends.MaxEntries()),
		Slots: int(d.t.slots.MaxEntries()), Ranges: int(d.objs.SrcRanges.MaxEntries())}
}

// sizedFor is c with room for want: powers of two, at least double.
func sizedFor(c Config, want servicemap.Capacity) Config {
	c.MaxServices = grownSize(c.MaxServices, max(want.Frontends, want.Ranges))
	c.MaxBackends = grownSize(c.MaxBackends, max(want.Backends, (want.Slots+1)/2)) // slots: twice --max-backends
	return c
}

func grownSize(cur uint32, want int) uint32 {
	if want <= int(cur) {
		return cur
	}
	n := max(uint64(cur)*2, uint64(1)<<bits.Len64(uint64(want-1)))
	// The slots map holds twice the backends: both must fit 32 bits.
	return uint32(max(min(n, 1<<30), uint64(cur)))
}

// grownConfig is the biggest config between c and sizedFor(c, want) that
// fits the budget and grows at least one map; ok is false if none does.
func grownConfig(c Config, want servicemap.Capacity) (Config, bool) {
	next := sizedFor(c, want)
	for next.MaxServices > c.MaxServices || next.MaxBackends > c.MaxBackends {
		if mapMemory(next) <= c.GrowBudget {
			return next, true
		}
		// Halve what is furthest past the budget's reach: backends cost
		// more per entry, so they go first.
		if next.MaxBackends > c.MaxBackends {
			next.MaxBackends = max(next.MaxBackends/2, c.MaxBackends)
		} else {
			next.MaxServices = max(next.MaxServices/2, c.MaxServices)
		}
	}
	return c, false
}

// htabElemSize and bucketSize are the kernel's per-entry overhead of a hash
// map that is not preallocated (struct htab_elem and struct bucket of
// kernel/bpf/hashtab.c, 64-bit); a per-CPU map's element holds a pointer
// to one value per possible CPU.
const (
	htabElemSize = 48
	bucketSize   = 16
)

// mapMemory estimates the kernel memory of the maps --max-services and
// --max-backends size, filled to capacity under c: buckets, elements,
// keys and values; the stats array whole. Unfilled, only the buckets and
// the array are allocated; the estimate is what the budget bounds. No map
// it counts has values per CPU, so it is the same on any machine.
func mapMemory(c Config) uint64 {
	var total uint64
	for _, d := range mapTable {
		if d.owner != objHooks || d.size == nil || (d.flag != "--max-services" && d.flag != "--max-backends") {
			continue
		}
		n := uint64(d.size(c))
		k, v := round8(reflect.TypeOf(d.key).Size()), round8(reflect.TypeOf(d.value).Size())
		per := htabElemSize + bucketSize + k + v
		if d.name == socklbbpf.SocklbMapStats {
			per = v // an array: the values alone, allocated whether used or not
		}
		total += n * per
	}
	return total
}

func round8(n uintptr) uint64 { return (uint64(n) + 7) &^ 7 }

// reload moves the datapath onto maps sized by next: load them (copying
// every entry, migrate.go), switch the links, then swap what the methods
// use. Called with d.mu held.
func (d *Datapath) reload(next Config) error {
	objs, pinDir, mig, err := loadObjects(next, d.retvalErr == nil)
	if err != nil {
		return err
	}
	if mig == nil || mig.refill {
		// Only sizes changed, so every map is kept or copied; anything
		// else is not a growth.
		if mig != nil {
			mig.abandon(pinDir)
		}
		objs.Close()
		return fmt.Errorf("the new maps under %s would start empty", pinDir)
	}
	var np *socklbbpf.NodeportObjects
	if d.nodeport != nil {
		if np, err = loadNodeport(next, &objs.SocklbMaps); err != nil {
			objs.Close()
			mig.abandon(pinDir)
			return err
		}
	}
	var forwardErr error
	if next.CgroupPath != "" {
		if err := attachHooks(next, &objs.SocklbPrograms, d.egressOn); err != nil {
			// Some links may run the new programs: put every one back
			// on the maps this agent keeps writing.
			back := attachHooks(d.cfg, &d.objs.SocklbPrograms, d.egressOn)
			if back == nil {
				if np != nil {
					np.Close()
				}
				objs.Close()
				mig.abandon(pinDir)
				return err
			}
			// Neither set of links is whole: go forward, onto the new
			// maps (complete copies), which the agent writes from now
			// on; RepairPins attaches what is missing.
			forwardErr = fmt.Errorf("switching the hooks to %s: %w; switching back: %v", pinDir, err, back)
		}
	}
	var term *terminator
	termErr := d.termErr
	if d.term != nil {
		// Its iterators read the backends: it follows them. Without it
		// sockets of removed backends stay, as when it was never there.
		term, termErr = newTerminator(next, &objs.SocklbMaps)
	}

	d.objsMu.Lock()
	oldObjs, oldNP, oldTerm := d.objs, d.nodeport, d.term
	d.objs, d.t, d.pinDir, d.cfg, d.nodeport, d.term, d.termErr = objs, tablesOf(&objs.SocklbMaps), pinDir, next, np, term, termErr
	d.objsMu.Unlock()

	errs := []error{forwardErr}
	if d.nodeport != nil {
		if err := d.attachDevices(); err != nil {
			// The devices keep the old programs on the old maps, which
			// nothing writes any more: every write retries them.
			d.devicesStale = true
			errs = append(errs, fmt.Errorf("switching the devices' programs to the maps under %s: %w", pinDir, err))
		}
	}
	if err := mig.switched(); err != nil {
		errs = append(errs, err)
	}
	d.svcIDs.resize(next.MaxServices)
	d.groupIDs.resize(next.MaxServices)
	d.backends.ids.resize(next.MaxBackends)
	d.migration = mig.String(pinDir)
	if oldTerm != nil {
		oldTerm.Close()
	}
	if oldNP != nil {
		oldNP.Close()
	}
	oldObjs.Close()
	return errors.Join(errs...)
}

// grownPin records, under maps/, that an agent grew its maps, and the
// --max-services and --max-backends sizes it grew them to (for readers:
// bpftool map dump pinned): a one-entry array, as bpffs holds nothing but
// BPF objects.
const grownPin = "grown"

func writeGrown(bpffs string, to Config) error {
	path := filepath.Join(mapsDir(bpffs), grownPin)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "socklb_grown", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Put(uint32(0), uint64(to.MaxServices)<<32|uint64(to.MaxBackends)); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return m.Pin(path)
}

func grownRecorded(bpffs string) bool {
	_, err := os.Stat(filepath.Join(mapsDir(bpffs), grownPin))
	return err == nil
}

// adoptGrownSizes keeps, per map, the serving generation's size where an
// agent grew it past c's; the record goes once c's sizes reach them.
func adoptGrownSizes(c Config) Config {
	if !grownRecorded(c.BPFFSPath) {
		return c
	}
	gens, err := generations(c.BPFFSPath)
	if err != nil || len(gens) == 0 {
		return c
	}
	g, ok := serving(c.BPFFSPath, gens)
	if !ok {
		g = gens[len(gens)-1] // no hooks: the newest, as a migration takes
	}
	size := func(name string) uint32 {
		m, err := ebpf.LoadPinnedMap(filepath.Join(g.dir, name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			return 0
		}
		defer m.Close()
		return m.MaxEntries()
	}
	svc, be := size(socklbbpf.SocklbMapServices), size(socklbbpf.SocklbMapBackends)
	if c.MaxServices >= svc && c.MaxBackends >= be {
		_ = os.Remove(filepath.Join(mapsDir(c.BPFFSPath), grownPin))
		return c
	}
	c.MaxServices, c.MaxBackends = max(c.MaxServices, svc), max(c.MaxBackends, be)
	return c
}

// retryStaleDevices switches the devices to the current programs after a
// growth could not. Called with d.mu held.
func (d *Datapath) retryStaleDevices() {
	if d.devicesStale && d.nodeport != nil && d.attachDevices() == nil {
		d.devicesStale = false
	}
}
