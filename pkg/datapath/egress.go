package datapath

import (
	"fmt"
	"path/filepath"

	"github.com/socklb/socklb/pkg/servicemap"
)

// The egress hook serves only loadBalancerSourceRanges of sockets on the
// node, yet the kernel runs it for every packet every socket of the cgroup
// sends (220-285 ns each, bench/results/hookcost). So it is attached only
// while a programmed frontend has ranges: before the first such frontend's
// service entry is written, so no socket sent through it escapes the check,
// and detached once the last is gone. Detached it misses nothing: with no
// frontend flagged it would pass every packet.

// prepareEgress attaches the egress hook when frontends about to be
// written need it. On failure those frontends are refused (egressRefused)
// rather than written unchecked; the rest are programmed as usual.
// While a migration waits, the links keep the older agent's programs and
// finishMigration attaches it with the others; once the links switched
// (the devices may still wait) this agent's programs flag sockets.
func (d *Datapath) prepareEgress(needed bool) {
	d.egressErr = nil
	if !needed || d.egressOn || d.cfg.CgroupPath == "" || d.linksWait() {
		return
	}
	cgid, err := cgroupID(d.cfg.CgroupPath)
	if err == nil {
		err = ensurePinDir(linksDir(d.cfg.BPFFSPath))
	}
	if err == nil {
		h := lazyHook()
		err = attachOne(filepath.Join(linksDir(d.cfg.BPFFSPath), h.name), d.cfg.CgroupPath, cgid, h, h.prog(&d.objs.SocklbPrograms))
	}
	if err != nil {
		d.egressErr = fmt.Errorf("its loadBalancerSourceRanges need the egress hook on cgroup %s, and attaching it failed: %w", d.cfg.CgroupPath, err)
		return
	}
	d.egressOn = true
}

// egressRefused says whether fe cannot be written because prepareEgress
// failed, and records why in res.
func (d *Datapath) egressRefused(fe servicemap.Frontend, res *ApplyResult) bool {
	if d.egressErr == nil || len(fe.SourceRanges) == 0 {
		return false
	}
	res.Failed[fe.Key] = fmt.Errorf("programming %s (Service %s, port %q): %w", fe.Key, fe.Service, fe.PortName, d.egressErr)
	return true
}

// settleEgress detaches the egress hook once no programmed frontend has
// ranges and none was asked for: a ranged frontend that failed (a full
// map) keeps it, so its retries do not attach and detach it each time. A
// failure leaves it attached, which costs time, not correctness; the next
// Apply tries again.
func (d *Datapath) settleEgress(asked bool) error {
	if !d.egressOn || d.ranged > 0 || asked || d.linksWait() {
		return nil
	}
	if err := detachPinned(filepath.Join(linksDir(d.cfg.BPFFSPath), lazyHook().name)); err != nil {
		return fmt.Errorf("detaching the egress hook no frontend needs any more: %w", err)
	}
	d.egressOn = false
	return nil
}

// linksWait says whether the links still run an older agent's programs.
func (d *Datapath) linksWait() bool { return d.pending != nil && !d.pending.linksSwitched }

func hasRanges(fes servicemap.State) bool {
	for _, fe := range fes {
		if len(fe.SourceRanges) > 0 {
			return true
		}
	}
	return false
}
