package datapath

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/socklb/socklb/internal/lab"
)

// TestTaskWalkListsTheCgroupsNamespaces: the task iterator finds one
// process of every network namespace in use in the hooked cgroup and its
// descendants (three made there, one a child cgroup's, the host's), the
// same set /proc gives, and none of a process outside the cgroup; a walk
// leaves nothing behind for the next, which sees a namespace go with its
// last process.
func TestTaskWalkListsTheCgroupsNamespaces(t *testing.T) {
	requireRoot(t)
	cg, err := lab.NewCgroup()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	child := filepath.Join(cg.Path(), "child")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	childFD, err := unix.Open(child, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		unix.Close(childFD)
		_ = os.Remove(child)
	})
	start := func(cgFD int, args ...string) *exec.Cmd {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if cgFD >= 0 {
			c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, cgFD
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		if args[0] == "unshare" {
			waitComm(t, c.Process.Pid, "sleep")
		}
		return c
	}
	own := func(args ...string) *exec.Cmd { return start(cg.FD(), args...) }
	a := own("unshare", "--net", "sleep", "60")
	own("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", a.Process.Pid), "sleep", "60")
	b := own("unshare", "--net", "sleep", "60")
	own("sleep", "60") // the host's namespace
	start(childFD, "unshare", "--net", "sleep", "60")
	start(-1, "unshare", "--net", "sleep", "60") // outside the cgroup

	l, err := newNetnsLister(cg.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fromProc := inodes(t, cgroupNamespaces(cg.Path()))
	if len(fromProc) != 4 {
		t.Fatalf("test setup: /proc lists %d namespaces in the cgroup, want 4", len(fromProc))
	}
	for i := range 2 {
		paths, err := l.namespaces()
		if err != nil {
			t.Fatal(err)
		}
		if got := inodes(t, paths); !slices.Equal(got, fromProc) {
			t.Errorf("walk %d: namespaces %v (%v), want /proc's %v", i+1, got, paths, fromProc)
		}
	}
	_ = b.Process.Kill()
	_ = b.Wait()
	paths, err := l.namespaces()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inodes(t, paths), inodes(t, cgroupNamespaces(cg.Path())); len(got) != 3 || !slices.Equal(got, want) {
		t.Errorf("after a namespace's last process exited: %v, want /proc's %v", got, want)
	}
}

func inodes(t *testing.T, paths []string) []uint64 {
	t.Helper()
	var out []uint64
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		out = append(out, st.Ino)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// waitComm waits until pid runs comm (unshare has made the namespace and
// exec'd it).
func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == comm {
			return
		}
	}
	t.Fatalf("process %d did not exec %s within 10 s", pid, comm)
}
