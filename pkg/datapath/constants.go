package datapath

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// setConstants fills the programs' load-time constants. Changing one means
// loading new programs, which attach swaps in with a link update.
func setConstants(spec *ebpf.CollectionSpec, cfg Config) error {
	if !cfg.HostNSOnly {
		return nil
	}
	cookie, err := ownNetnsCookie()
	if err != nil {
		return fmt.Errorf("--socket-lb-hostns-only needs this network namespace's cookie: %w", err)
	}
	for name, v := range map[string]any{"hostns_only": uint8(1), "host_netns_cookie": cookie} {
		sv, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("BPF object has no variable %s", name)
		}
		if err := sv.Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// ownNetnsCookie is the cookie bpf_get_netns_cookie returns for sockets of
// the agent's network namespace (SO_NETNS_COOKIE, Linux 5.14+).
func ownNetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var cookie uint64
	size := uint32(unsafe.Sizeof(cookie))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soNetnsCookie,
		uintptr(unsafe.Pointer(&cookie)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("getsockopt SO_NETNS_COOKIE (Linux 5.14+): %w", errno)
	}
	return cookie, nil
}

// soNetnsCookie is SO_NETNS_COOKIE from asm-generic/socket.h; x/sys does
// not export it.
const soNetnsCookie = 71
