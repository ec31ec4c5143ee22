package datapath

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestHookStatsCountAConnect attaches the hooks to a fresh child cgroup,
// runs one connect() to a 127.0.0.1 listener from a shell placed in that
// cgroup, and expects connect4's counters, read through the pinned link as
// the benchmark reads them, to have moved by that call.
func TestHookStatsCountAConnect(t *testing.T) {
	requireRoot(t)
	cg := childCgroup(t)
	dir := pinDir(t)
	openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path()})

	progs, err := OpenHookPrograms(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer progs.Close()
	// No frontend has source ranges: every hook but the lazy egress one.
	if _, ok := progs["egress"]; ok || len(progs) != len(hooks)-1 {
		t.Fatalf("opened %d hook programs (%v), want the %d of %v but egress", len(progs), progs, len(hooks)-1, HookNames())
	}
	on, err := EnableRunTimeStats()
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	before, err := progs.Stats()
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("connect from the cgroup: %v: %s", err, strings.TrimSpace(string(out)))
	}
	after, err := progs.Stats()
	if err != nil {
		t.Fatal(err)
	}
	d := SubStats(before, after)["connect4"]
	if d.RunCount < 1 || d.RunTimeNS == 0 {
		t.Errorf("connect4 after one connect: %+v, want at least one call with its run time", d)
	}
	if _, ok := d.NSPerCall(); !ok {
		t.Errorf("connect4: no ns per call from %+v", d)
	}
	if _, ok := (HookStats{}).NSPerCall(); ok {
		t.Error("NSPerCall of no call says it has a figure")
	}
}
