package datapath

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// setConstants fills the programs' load-time constants. Changing one means
// loading new programs, which attach swaps in with a link update.
//
// host_netns_cookie is the agent's namespace, the host's for a hostNetwork
// DaemonSet: localhost NodePorts are served there only. Without
// SO_NETNS_COOKIE it stays 0, which the hooks read as "every namespace is
// the host's" (a pod's own 127.0.0.1:<nodePort> listener is then shadowed).
//
// have_set_retval and have_kern_ctx leave bpf_set_retval and the
// bpf_cast_to_kern_ctx kfunc out of the verified program on a kernel
// without them: the verifier skips the branch a constant rules out.
func setConstants(spec *ebpf.CollectionSpec, cfg Config, setRetval bool) error {
	consts := map[string]any{"have_set_retval": boolByte(setRetval), "have_kern_ctx": boolByte(probeKernCtx(cfg) == nil)}
	cookie, err := ownNetnsCookie()
	switch {
	case err == nil:
		consts["host_netns_cookie"] = cookie
	case cfg.HostNSOnly:
		return fmt.Errorf("--socket-lb-hostns-only needs this network namespace's cookie: %w", err)
	}
	if cfg.HostNSOnly {
		consts["hostns_only"] = uint8(1)
	}
	for name, v := range consts {
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

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
