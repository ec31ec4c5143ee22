package datapath

import (
	"fmt"

	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// raiseMemlock lifts RLIMIT_MEMLOCK where the kernel charges BPF maps to
// it (before 5.11), whose usual 8 MiB (64 KiB on older distributions) holds
// far less than the default maps; from 5.11 on it does nothing. Without
// CAP_SYS_RESOURCE the soft limit can still rise to the hard one: if that
// is too little, loading the maps fails and says so. The error returned is
// for the log, not fatal.
func raiseMemlock() error {
	err := rlimit.RemoveMemlock()
	if err == nil {
		return nil
	}
	var lim unix.Rlimit
	if gerr := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); gerr == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim)
	}
	return fmt.Errorf("this kernel charges BPF maps to RLIMIT_MEMLOCK, which could not be lifted (%w); it stays at its hard limit. "+
		"If the maps do not fit, give the agent CAP_SYS_RESOURCE or start it with LimitMEMLOCK=infinity", err)
}

// MemlockError says why RLIMIT_MEMLOCK stayed finite on a kernel that
// charges BPF maps to it, or is nil.
func (d *Datapath) MemlockError() error { return d.memlockErr }
