package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ProcSysNet is where a process that is not in a container finds this
// network namespace's sysctls.
const ProcSysNet = "/proc/sys/net"

// SetConntrackTimeouts sets the node's TCP conntrack timeouts for
// established and CLOSE_WAIT connections, as kube-proxy does at start
// (--conntrack-tcp-timeout-established, --conntrack-tcp-timeout-close-wait):
// conntrack still tracks the node's and its pods' connections when socklb
// replaces kube-proxy, and workloads rely on kube-proxy's values (a
// CLOSE_WAIT entry kept an hour, not the kernel's minute). Zero leaves a
// value alone; a value already set is not written again. It reports
// whether conntrack is loaded at all: without it there is nothing to set.
// procSysNet is ProcSysNet or, in a container whose /proc/sys is read-only,
// the node's mounted elsewhere; its files act on the network namespace of
// the process that opens them, the node's for a hostNetwork agent.
func SetConntrackTimeouts(procSysNet string, established, closeWait time.Duration) (loaded bool, err error) {
	conntrackDir := filepath.Join(procSysNet, "netfilter")
	if _, err := os.Stat(conntrackDir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	var errs []error
	for name, d := range map[string]time.Duration{
		"nf_conntrack_tcp_timeout_established": established,
		"nf_conntrack_tcp_timeout_close_wait":  closeWait,
	} {
		if d <= 0 {
			continue
		}
		errs = append(errs, setSysctl(filepath.Join(conntrackDir, name), int(d/time.Second)))
	}
	return true, errors.Join(errs...)
}

func setSysctl(path string, v int) error {
	cur, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nf_conntrack without TCP tracking: nothing to set
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(cur))); err == nil && n == v {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("setting %s to %d: %w", path, v, err)
	}
	return nil
}
