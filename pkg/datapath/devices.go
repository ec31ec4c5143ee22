package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// Device is a network device the per-packet path serves: packets from
// other machines come in through it, and flows SNATed toward another node
// leave through it with Addr4 or Addr6 (the node's own address on it) as
// their source.
type Device struct {
	Name  string
	Index int
	Addr4 netip.Addr // invalid: no IPv4 flow is SNATed out of it
	Addr6 netip.Addr
}

// tcx directions of a device's two programs: from the device (the
// client's packets, a remote backend's replies) and to it (a local
// backend's replies).
var devHooks = []struct {
	dir    string
	attach ebpf.AttachType
	prog   func(*socklbbpf.NodeportPrograms) *ebpf.Program
}{
	{"ingress", ebpf.AttachTCXIngress, func(p *socklbbpf.NodeportPrograms) *ebpf.Program { return p.SocklbFromNetdev }},
	{"egress", ebpf.AttachTCXEgress, func(p *socklbbpf.NodeportPrograms) *ebpf.Program { return p.SocklbToNetdev }},
}

// A device link's pin: links/dev-<ifname>-<direction>.
var devPinName = regexp.MustCompile(`^dev-(.+)-(ingress|egress)$`)

func devPin(bpffs, name, dir string) string {
	return filepath.Join(linksDir(bpffs), "dev-"+name+"-"+dir)
}

// loadNodeport loads the per-packet programs beside the hooks' maps.
func loadNodeport(cfg Config, shared *socklbbpf.SocklbMaps) (*socklbbpf.NodeportObjects, error) {
	spec, err := socklbbpf.LoadNodeport()
	if err != nil {
		return nil, fmt.Errorf("reading embedded per-packet object: %w", err)
	}
	applySizes(spec.Maps, cfg)
	if err := setFlowConstants(spec, cfg); err != nil {
		return nil, err
	}
	var objs socklbbpf.NodeportObjects
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: stateMaps(shared)})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("loading the per-packet programs: the kernel's verifier refused them: %+v", verr)
		}
		return nil, fmt.Errorf("loading the per-packet programs (tc BPF with bpf_fib_lookup and bpf_redirect_neigh; --packet-lb=false runs without them): %w", err)
	}
	return &objs, nil
}

// setFlowConstants sets the flows' SNAT port range and timeouts.
func setFlowConstants(spec *ebpf.CollectionSpec, cfg Config) error {
	vals := map[string]any{"nat_port_min": cfg.NATPortMin, "nat_port_max": cfg.NATPortMax}
	for name, ns := range cfg.FlowTimeouts.constants() {
		vals[name] = ns
	}
	for name, v := range vals {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("the per-packet object has no %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// SetDevices makes the per-packet path serve exactly devs: their programs
// attached with pinned tcx links (an earlier agent's are switched to this
// one's programs in one step), their SNAT addresses in nat_devs, and the
// links of devices no longer served removed. While a migration waits for
// its first Apply, attaching waits with it: the links would run programs
// whose maps are still empty.
func (d *Datapath) SetDevices(devs []Device) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodeport == nil {
		return errors.New("the per-packet path is off (--packet-lb=false): no device can be served")
	}
	d.devices = slices.Clone(devs)
	if d.pending != nil {
		return nil
	}
	return d.attachDevices()
}

// Devices returns the devices the per-packet path serves.
func (d *Datapath) Devices() []Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.devices)
}

// attachDevices applies d.devices; called with d.mu held.
func (d *Datapath) attachDevices() error {
	var errs []error
	want := map[string]bool{}
	served := map[uint32]bool{}
	for _, dev := range d.devices {
		for _, h := range devHooks {
			pin := devPin(d.cfg.BPFFSPath, dev.Name, h.dir)
			want[filepath.Base(pin)] = true
			if err := attachDevice(pin, dev, h.attach, h.prog(&d.nodeport.NodeportPrograms)); err != nil {
				errs = append(errs, fmt.Errorf("attaching the per-packet program to %s (%s): %w", dev.Name, h.dir, err))
			}
		}
		nd := socklbbpf.SocklbNatDev{}
		if dev.Addr4.IsValid() {
			nd.Addr4 = addrBytes(dev.Addr4)
		}
		if dev.Addr6.IsValid() {
			nd.Addr6 = addrBytes(dev.Addr6)
		}
		if err := d.t.natDevs.Put(uint32(dev.Index), nd); err != nil {
			errs = append(errs, fmt.Errorf("recording %s's SNAT addresses: %w", dev.Name, err))
		}
		served[uint32(dev.Index)] = true
	}
	errs = append(errs, removeDeviceLinks(d.cfg.BPFFSPath, func(name string) bool { return !want[name] }))
	var idx uint32
	var nd socklbbpf.SocklbNatDev
	var stale []uint32
	it := d.t.natDevs.Iterate()
	for it.Next(&idx, &nd) {
		if !served[idx] {
			stale = append(stale, idx)
		}
	}
	for _, i := range stale {
		_ = d.t.natDevs.Delete(i)
	}
	return errors.Join(errs...)
}

// attachDevice attaches prog to dev in one direction, or switches the link
// pinned for it to prog. A pinned link of a device that was replaced by
// another of the same name (its index changed) is dropped first.
func attachDevice(pin string, dev Device, attach ebpf.AttachType, prog *ebpf.Program) error {
	l, err := link.LoadPinnedLink(pin, nil)
	switch {
	case err == nil:
		defer l.Close()
		info, err := l.Info()
		if err != nil {
			return fmt.Errorf("reading pinned link %s: %w", pin, err)
		}
		if tcx := info.TCX(); tcx != nil && int(tcx.Ifindex) == dev.Index && ebpf.AttachType(tcx.AttachType) == attach {
			if err := l.Update(prog); err != nil {
				return fmt.Errorf("switching pinned link %s to the new program: %w", pin, err)
			}
			return nil
		}
		if err := l.Unpin(); err != nil {
			return fmt.Errorf("removing the stale link %s: %w", pin, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	nl, err := link.AttachTCX(link.TCXOptions{Interface: dev.Index, Program: prog, Attach: attach})
	if err != nil {
		return fmt.Errorf("tcx (Linux 6.6+): %w", err)
	}
	defer nl.Close()
	if err := nl.Pin(pin); err != nil {
		return fmt.Errorf("pinning link at %s: %w", pin, err)
	}
	return nil
}

// removeDeviceLinks unpins (and so detaches) the device links whose pin
// name drop selects.
func removeDeviceLinks(bpffs string, drop func(name string) bool) error {
	entries, err := os.ReadDir(linksDir(bpffs))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", linksDir(bpffs), err)
	}
	var errs []error
	for _, e := range entries {
		if devPinName.MatchString(e.Name()) && drop(e.Name()) {
			if err := os.Remove(filepath.Join(linksDir(bpffs), e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
