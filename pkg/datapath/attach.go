package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
)

type hook struct {
	name   string
	attach ebpf.AttachType
	prog   func(*socklbbpf.SocklbPrograms) *ebpf.Program
	// lazy: attached only while some frontend needs it (egress.go).
	lazy bool
}

var hooks = []hook{
	// loadBalancerSourceRanges for sockets: the source exists only once the
	// packet does. First, so that it is in place before a connect hook of
	// the same agent can flag a socket for it (attachHooks detaches it
	// last, after the connect hooks stopped serving maps that need it).
	{"egress", ebpf.AttachCGroupInetEgress, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbEgress }, true},
	{"connect4", ebpf.AttachCGroupInet4Connect, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbConnect4 }, false},
	{"sendmsg4", ebpf.AttachCGroupUDP4Sendmsg, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbSendmsg4 }, false},
	{"recvmsg4", ebpf.AttachCGroupUDP4Recvmsg, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbRecvmsg4 }, false},
	{"getpeername4", ebpf.AttachCgroupInet4GetPeername, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbGetpeername4 }, false},
	{"connect6", ebpf.AttachCGroupInet6Connect, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbConnect6 }, false},
	{"sendmsg6", ebpf.AttachCGroupUDP6Sendmsg, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbSendmsg6 }, false},
	{"recvmsg6", ebpf.AttachCGroupUDP6Recvmsg, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbRecvmsg6 }, false},
	{"getpeername6", ebpf.AttachCgroupInet6GetPeername, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbGetpeername6 }, false},
	// Last: it only forgets what the connect hooks wrote (sock_conns).
	{"sock_release", ebpf.AttachCgroupInetSockRelease, func(p *socklbbpf.SocklbPrograms) *ebpf.Program { return p.SocklbSockRelease }, false},
}

// attachHooks attaches every hook to the cgroup with a pinned bpf_link,
// the lazy ones only when withLazy; otherwise it detaches those once every
// other hook switched, so a failure halfway leaves the hooks that still
// serve older maps with their check. A link an earlier agent pinned is
// kept and switched to the new program in one step (link update), so an
// upgrade never leaves the cgroup without a hook, not even for a moment.
func attachHooks(cfg Config, progs *socklbbpf.SocklbPrograms, withLazy bool) error {
	if err := ensurePinDir(linksDir(cfg.BPFFSPath)); err != nil {
		return err
	}
	cgid, err := cgroupID(cfg.CgroupPath)
	if err != nil {
		return err
	}
	var unneeded []string
	for _, h := range hooks {
		pin := filepath.Join(linksDir(cfg.BPFFSPath), h.name)
		if h.lazy && !withLazy {
			unneeded = append(unneeded, pin)
			continue
		}
		if err := attachOne(pin, cfg.CgroupPath, cgid, h, h.prog(progs)); err != nil {
			return fmt.Errorf("attaching %s to cgroup %s: %w", h.name, cfg.CgroupPath, err)
		}
	}
	for _, pin := range unneeded {
		if err := detachPinned(pin); err != nil {
			return err
		}
	}
	return nil
}

// lazyHook is the hook attached only while a frontend needs it.
func lazyHook() hook {
	for _, h := range hooks {
		if h.lazy {
			return h
		}
	}
	panic("no lazy hook")
}

func attachOne(pin, cgroup string, cgid uint64, h hook, prog *ebpf.Program) error {
	l, err := link.LoadPinnedLink(pin, nil)
	switch {
	case err == nil:
		defer l.Close()
		info, err := l.Info()
		if err != nil {
			return fmt.Errorf("reading pinned link %s: %w", pin, err)
		}
		if cg := info.Cgroup(); cg == nil || cg.CgroupId != cgid {
			return fmt.Errorf("the link pinned at %s is attached to another cgroup than %s; "+
				"run `socklb cleanup` with this --bpffs-path first, or use the --cgroup-path it was made with", pin, cgroup)
		}
		if err := l.Update(prog); err != nil {
			return fmt.Errorf("switching pinned link %s to the new program: %w", pin, err)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroup, Attach: h.attach, Program: prog})
		if err != nil {
			return err
		}
		defer l.Close()
		if err := l.Pin(pin); err != nil {
			return fmt.Errorf("pinning link at %s (the kernel needs bpf_link support for cgroups, 5.7+): %w", pin, err)
		}
		return nil
	default:
		return fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
}

// detachPinned detaches the link pinned at pin, if any: the pin is its
// last reference once this process closes its own.
func detachPinned(pin string) error {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening pinned link %s: %w", pin, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpinning link %s to detach it: %w", pin, err)
	}
	return nil
}

// cgroupID is the cgroup's inode number on cgroup2, which is the id the
// kernel reports for the cgroup a link is attached to.
func cgroupID(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("opening cgroup %s: %w", path, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, fmt.Errorf("%s is not a cgroup v2 directory: pass --cgroup-path on a cgroup2 mount (e.g. /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts)", path)
	}
	var s unix.Stat_t
	if err := unix.Stat(path, &s); err != nil {
		return 0, fmt.Errorf("opening cgroup %s: %w", path, err)
	}
	return s.Ino, nil
}
