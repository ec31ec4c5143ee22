package host

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/socklb/socklb/internal/testkit"
)

// TestSetConntrackTimeouts: in a network namespace of its own (conntrack
// sysctls are per namespace: the machine's are never touched), the
// timeouts become kube-proxy's, a zero leaves its value alone, and the
// namespace the call was not made in keeps its own.
func TestSetConntrackTimeouts(t *testing.T) {
	testkit.RequireRoot(t, "creates a network namespace and writes its sysctls")
	conntrackDir := filepath.Join(ProcSysNet, "netfilter")
	if _, err := os.Stat(conntrackDir); err != nil {
		t.Skipf("nf_conntrack is not loaded on this machine (%v): nothing to set", err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(conntrackDir, name))
		if err != nil {
			t.Errorf("reading %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	hostCloseWait := read("nf_conntrack_tcp_timeout_close_wait")
	ns, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // dies with the goroutine, in ns
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		before := read("nf_conntrack_tcp_timeout_established")
		loaded, err := SetConntrackTimeouts(ProcSysNet, 0, time.Hour)
		if err != nil || !loaded {
			t.Errorf("SetConntrackTimeouts: loaded %v, %v", loaded, err)
		}
		if got := read("nf_conntrack_tcp_timeout_close_wait"); got != "3600" {
			t.Errorf("close_wait %s, want 3600", got)
		}
		if got := read("nf_conntrack_tcp_timeout_established"); got != before {
			t.Errorf("established %s changed with 0 given, was %s", got, before)
		}
		if _, err := SetConntrackTimeouts(ProcSysNet, 24*time.Hour, 0); err != nil {
			t.Error(err)
		}
		if got := read("nf_conntrack_tcp_timeout_established"); got != "86400" {
			t.Errorf("established %s, want 86400", got)
		}
	}()
	<-done
	if got := read("nf_conntrack_tcp_timeout_close_wait"); got != hostCloseWait {
		t.Errorf("the test's own namespace changed: close_wait %s, was %s", got, hostCloseWait)
	}
}
