package datapath

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Datapath owns the loaded programs, the pinned maps and the record of what
// they hold. Its methods are safe for concurrent use.
type Datapath struct {
	cfg  Config
	objs *socklbbpf.SocklbObjects
	t    tables
	lock *pinLock // held for the Datapath's life: one writer per pin directory
	// pinDir is the generation directory of this binary's map layout.
	pinDir string
	// objsMu orders the readers that do not take mu (scrapes, the flow
	// sweep) with Grow's swap of the kernel objects below, which happens
	// with mu held too.
	objsMu sync.RWMutex

	mu       sync.Mutex
	current  map[servicemap.FrontendKey]*Service
	svcIDs   *idAllocator
	backends *backendTable
	groupIDs *idAllocator
	groups   map[affinityGroup]*groupRef
	batch    batchWriter

	term    *terminator // nil when socket termination is off or unavailable
	termErr error       // why it is unavailable
	// retvalErr says why hooks cannot choose their errno (nil: they can).
	retvalErr error
	// memlockErr says why RLIMIT_MEMLOCK stayed finite on a kernel that
	// charges BPF maps to it (nil: it did not need to, or it rose).
	memlockErr error
	retired    []socklbbpf.SocktermSockTarget
	// pending is a migration waiting for the first Apply to fill the new
	// maps before the links switch to them; pendingErr says why it still
	// waits, or why dropping the old generation failed.
	pending    *migration
	pendingErr error
	migration  string                               // what Open migrated, for the agent's log
	refs       map[socklbbpf.SocktermSockTarget]int // frontends using each backend address

	// The per-packet path: nil when cfg.PacketLB is off.
	nodeport *socklbbpf.NodeportObjects
	devices  []Device
	// devicesStale: a growth could not switch the devices' programs to
	// the new maps; each write tries again.
	devicesStale bool
	// ranged counts the programmed frontends with source ranges, and
	// egressOn says whether this agent keeps the egress hook attached for
	// them; egressErr is why attaching it failed in the current Apply.
	ranged    int
	egressOn  bool
	egressErr error
	// slotCount, memberCount and rangeCount are the programmed slots,
	// members and source ranges, kept by setCurrent; usage is what the
	// last write published.
	slotCount, memberCount, rangeCount int
	usage                              atomic.Pointer[usageCounts]

	// flowCount is the flows map's entries at the last ExpireFlows.
	flowCount atomic.Int64
}

// Open loads socklb's programs and maps (adopting pinned maps and their
// contents when an earlier agent left them), and, when cfg.CgroupPath is
// set, attaches the hooks to that cgroup with pinned links. It checks its
// Config (Check) before it creates or mounts anything.
func Open(cfg Config) (*Datapath, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := ensureBPFFS(cfg.BPFFSPath); err != nil {
		return nil, err
	}
	lock, err := lockPins(cfg.BPFFSPath, cfg.LockTimeout, cfg.LockWait)
	if err != nil {
		return nil, err
	}
	cfg = adoptGrownSizes(cfg)
	memlockErr := raiseMemlock()
	retvalErr, err := probeSetRetval(cfg)
	if err != nil {
		lock.release()
		return nil, err
	}
	objs, pinDir, mig, err := loadObjects(cfg, retvalErr == nil)
	if err != nil {
		lock.release()
		return nil, err
	}
	d := &Datapath{
		cfg:        cfg,
		objs:       objs,
		lock:       lock,
		pinDir:     pinDir,
		t:          tablesOf(&objs.SocklbMaps),
		svcIDs:     newIDAllocator(cfg.MaxServices),
		backends:   newBackendTable(cfg.MaxBackends),
		retvalErr:  retvalErr,
		memlockErr: memlockErr,
		groupIDs:   newIDAllocator(cfg.MaxServices),
		groups:     map[affinityGroup]*groupRef{},
		batch:      newBatchWriter(),
	}
	if err := d.adopt(); err != nil {
		d.Close()
		return nil, fmt.Errorf("adopting pinned state under %s: %w", cfg.BPFFSPath, err)
	}
	if mig != nil {
		d.migration = mig.String(pinDir)
	}
	if mig != nil && mig.refill && cfg.CgroupPath != "" && linksPinned(cfg.BPFFSPath) {
		// The new maps are empty: the pinned links keep the old programs
		// until the first Apply has filled them (finishMigration).
		d.pending = mig
	} else {
		if mig != nil {
			mig.carry()
			d.migration = mig.String(pinDir)
		}
		if cfg.CgroupPath != "" {
			if err := attachHooks(cfg, &objs.SocklbPrograms, d.ranged > 0); err != nil {
				d.Close()
				return nil, err
			}
			d.egressOn = d.ranged > 0
		}
		if mig != nil {
			d.pendingErr = mig.switched()
			d.migration = mig.String(pinDir)
		}
	}
	if cfg.PacketLB {
		if d.nodeport, err = loadNodeport(cfg, &objs.SocklbMaps); err != nil {
			d.Close()
			return nil, err
		}
	}
	if cfg.CgroupPath != "" {
		switch {
		case cfg.TerminateSockets == TerminateNone:
		case cfg.disabled(FeatureSockDestroy):
			d.termErr = fmt.Errorf("bpf_sock_destroy: %w", errDisabled)
		default:
			// Without it the Services still work; only sockets
			// connected to a removed backend stay stuck.
			d.term, d.termErr = newTerminator(cfg, &objs.SocklbMaps)
		}
	}
	return d, nil
}

// Migration describes the move from maps of another layout or size that
// Open made, or is empty when it adopted or created the maps.
func (d *Datapath) Migration() string { return d.migration }

// SocketTerminationError says why sockets of removed backends are not
// destroyed, or nil when they are (or when that was not asked for).
func (d *Datapath) SocketTerminationError() error { return d.termErr }

// SocketWalkSlowError says why the namespaces whose sockets a removal
// walks are found by reading every process's /proc entry (about 9 µs a
// process, each sync that removes an endpoint) instead of one walk of the
// kernel's task list, or nil when they are not (or nothing is walked).
func (d *Datapath) SocketWalkSlowError() error {
	if d.term == nil {
		return nil
	}
	return d.term.listErr
}

// Close releases this process's handles. Pinned maps and links stay, so the
// hooks keep translating with the last programmed state.
// The pin directory's lock is released last, once nothing of this process
// can write any more.
func (d *Datapath) Close() error {
	if d.term != nil {
		d.term.Close()
	}
	if d.nodeport != nil {
		d.nodeport.Close()
	}
	err := d.objs.Close()
	d.lock.release()
	return err
}

// Maps exposes the loaded maps to tests that load programs beside them.
func (d *Datapath) Maps() *socklbbpf.SocklbMaps { return &d.objs.SocklbMaps }

// Programmed returns a copy of the programmed frontends.
func (d *Datapath) Programmed() map[servicemap.FrontendKey]Service {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[servicemap.FrontendKey]Service, len(d.current))
	for k, s := range d.current {
		out[k] = *s
	}
	return out
}

// adopt reads back what the maps hold, so the first Apply after a restart
// is a diff against the kernel's truth, and removes what a crash mid-update
// left unreferenced.
func (d *Datapath) adopt() error {
	cur, err := readServices(d.t)
	if err != nil {
		return err
	}
	live := map[socklbbpf.SocklbSlotKey]bool{}
	liveBackends := map[uint32]bool{}
	liveMembers := map[socklbbpf.SocklbMemberKey]bool{}
	for _, s := range cur {
		d.svcIDs.reserve(s.ID)
		if !d.adoptGroup(s) {
			s.Broken = true
		}
		for i, id := range s.BackendIDs {
			d.backends.adopt(backendKeyOf(s.AffinityID, s.Frontend.Key.Proto, s.Frontend.Backends[i]), id)
			liveBackends[id] = true
		}
		for _, b := range s.Frontend.Backends {
			if needsMembers(s.Frontend) {
				liveMembers[memberKey(s.ID, b)] = true
			}
		}
		for slot := uint32(0); slot < uint32(len(s.BackendIDs)); slot++ {
			live[socklbbpf.SocklbSlotKey{SvcId: s.ID, Generation: s.Generation, Slot: slot}] = true
		}
	}
	d.current = map[servicemap.FrontendKey]*Service{}
	for _, s := range cur {
		d.setCurrent(s)
	}
	d.refs = map[socklbbpf.SocktermSockTarget]int{}
	for _, s := range cur {
		for _, t := range d.sockTargets(s.Frontend) {
			d.ref(t)
		}
	}
	var errs []error
	errs = append(errs, sweep(d.t.slots, func(k socklbbpf.SocklbSlotKey) bool { return live[k] }))
	errs = append(errs, sweep(d.t.backends, func(id uint32) bool { return liveBackends[id] }))
	errs = append(errs, sweep(d.t.members, func(k socklbbpf.SocklbMemberKey) bool { return liveMembers[k] }))
	liveSvc := map[uint32]bool{}
	for _, s := range cur {
		liveSvc[s.ID] = true
	}
	errs = append(errs, sweep(d.t.svcNames, func(id uint32) bool { return liveSvc[id] }))
	d.publishUsage()
	return errors.Join(errs...)
}
