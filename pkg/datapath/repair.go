package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// RepairPins checks that the pins this agent serves from are still there
// and still its own, and puts back what disappeared: `socklb cleanup
// --force`, or a hand `rm` under /sys/fs/bpf, unpins links (which detaches
// the hooks at once) and maps (which a restarted agent could then not
// adopt) while this agent goes on believing it serves. A missing map is
// pinned again from the handle this process holds; a missing link is
// attached anew and pinned. It returns what it re-created. An error means
// the pins cannot be trusted: one now points at another object (another
// agent took the directory over), or re-creating failed.
func (d *Datapath) RepairPins() (repaired []string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir := d.cfg.BPFFSPath
	if !d.lock.sameDir(dir) {
		if err := ensurePinDir(dir); err != nil {
			return nil, err
		}
		l, err := tryLock(dir)
		if err != nil {
			return nil, fmt.Errorf("pin directory %s was removed and made again, and locking the new one failed (%w): another agent may serve from it now", dir, err)
		}
		d.lock.release()
		d.lock = l
		repaired = append(repaired, dir)
	}
	for _, p := range []string{mapsDir(dir), d.pinDir} {
		if err := ensurePinDir(p); err != nil {
			return repaired, err
		}
	}
	errs := []error{d.pendingErr}
	for name, m := range stateMaps(&d.objs.SocklbMaps) {
		pin := filepath.Join(d.pinDir, name)
		fixed, err := repairMapPin(pin, m)
		if fixed {
			repaired = append(repaired, pin)
		}
		errs = append(errs, err)
	}
	// While a migration waits for its first Apply the links rightly run
	// the older agent's programs.
	if d.cfg.CgroupPath != "" && !d.linksWait() {
		fixed, err := repairLinks(d.cfg, &d.objs.SocklbPrograms, d.egressOn)
		repaired = append(repaired, fixed...)
		errs = append(errs, err)
	}
	if d.nodeport != nil && d.pending == nil {
		fixed, err := d.repairDeviceLinks()
		repaired = append(repaired, fixed...)
		errs = append(errs, err)
	}
	return repaired, errors.Join(errs...)
}

func repairMapPin(pin string, m *ebpf.Map) (bool, error) {
	want, err := m.Info()
	if err != nil {
		return false, fmt.Errorf("reading map %s: %w", pin, err)
	}
	wantID, _ := want.ID()
	pinned, err := ebpf.LoadPinnedMap(pin, &ebpf.LoadPinOptions{ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		// Pin is a no-op while the handle remembers its old path.
		if err := m.Unpin(); err != nil {
			return false, fmt.Errorf("forgetting the lost pin %s: %w", pin, err)
		}
		if err := m.Pin(pin); err != nil {
			return false, fmt.Errorf("pinning map again at %s: %w", pin, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening pinned map %s: %w", pin, err)
	}
	defer pinned.Close()
	info, err := pinned.Info()
	if err != nil {
		return false, fmt.Errorf("reading pinned map %s: %w", pin, err)
	}
	if id, _ := info.ID(); id != wantID {
		return false, fmt.Errorf("%s is no longer the map this agent writes (id %d, want %d): another agent pinned its own there; stop one of them", pin, id, wantID)
	}
	return false, nil
}

func repairLinks(cfg Config, progs *socklbbpf.SocklbPrograms, withLazy bool) ([]string, error) {
	if err := ensurePinDir(linksDir(cfg.BPFFSPath)); err != nil {
		return nil, err
	}
	cgid, err := cgroupID(cfg.CgroupPath)
	if err != nil {
		return nil, err
	}
	var fixed []string
	var errs []error
	for _, h := range hooks {
		if h.lazy && !withLazy {
			continue
		}
		pin := filepath.Join(linksDir(cfg.BPFFSPath), h.name)
		prog := h.prog(progs)
		l, err := link.LoadPinnedLink(pin, nil)
		if errors.Is(err, os.ErrNotExist) {
			if err := attachOne(pin, cfg.CgroupPath, cgid, h, prog); err != nil {
				errs = append(errs, fmt.Errorf("attaching %s to cgroup %s again: %w", h.name, cfg.CgroupPath, err))
				continue
			}
			fixed = append(fixed, pin)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("opening pinned link %s: %w", pin, err))
			continue
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading pinned link %s: %w", pin, err))
			continue
		}
		pi, err := prog.Info()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading program %s: %w", h.name, err))
			continue
		}
		if id, _ := pi.ID(); info.Program != id {
			errs = append(errs, fmt.Errorf("the link pinned at %s runs program %d, not this agent's %d: another agent switched it; stop one of them", pin, info.Program, id))
		}
	}
	return fixed, errors.Join(errs...)
}

// repairDeviceLinks attaches again the device links whose pins are gone.
func (d *Datapath) repairDeviceLinks() ([]string, error) {
	var fixed []string
	var errs []error
	for _, dev := range d.devices {
		for _, h := range devHooks {
			pin := devPin(d.cfg.BPFFSPath, dev.Name, h.dir)
			if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err := attachDevice(pin, dev, h.attach, h.prog(&d.nodeport.NodeportPrograms)); err != nil {
				errs = append(errs, fmt.Errorf("attaching the per-packet program to %s (%s) again: %w", dev.Name, h.dir, err))
				continue
			}
			fixed = append(fixed, pin)
		}
	}
	return fixed, errors.Join(errs...)
}
