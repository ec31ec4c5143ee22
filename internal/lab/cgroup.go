package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// CgroupPrefix starts the name of every cgroup this package creates.
const CgroupPrefix = "socklb-lab-"

var cgroupSeq atomic.Int64

// Cgroup is a fresh child cgroup (cgroup v2) created for one test. socklb's
// programs are attached to it, and only the processes the test starts run in
// it.
type Cgroup struct {
	mount string // the cgroup2 mount point (the root cgroup: never touched)
	path  string // mount/socklb-lab-<pid>-<n>
	dir   *os.File

	closeOnce sync.Once
	closeErr  error
}

// Cgroup2Mount returns the mount point of the cgroup2 hierarchy, read from
// /proc/self/mountinfo: /sys/fs/cgroup/unified on a hybrid host,
// /sys/fs/cgroup on a pure cgroup2 host.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		found = append(found, unescapeMountinfo(pf[4]))
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	for _, want := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		for _, m := range found {
			if m == want {
				return m, nil
			}
		}
	}
	return found[0], nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space ...) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// NewCgroup creates socklb-lab-<pid>-<n> directly under the cgroup2 mount.
func NewCgroup() (*Cgroup, error) {
	mount, err := Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d-%d", CgroupPrefix, os.Getpid(), cgroupSeq.Add(1))
	path := filepath.Join(mount, name)
	c := &Cgroup{mount: mount, path: path}
	if err := c.checkOwn(); err != nil {
		return nil, err
	}
	// Mkdir fails if the directory exists: we never adopt a cgroup we did
	// not create.
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	dir, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	c.dir = dir
	return c, nil
}

// checkOwn refuses any path that is not a socklb-lab- child directly under
// the cgroup2 mount: in particular the root cgroup itself.
func (c *Cgroup) checkOwn() error {
	clean := filepath.Clean(c.path)
	if c.mount == "" || clean == filepath.Clean(c.mount) || filepath.Dir(clean) != filepath.Clean(c.mount) ||
		!strings.HasPrefix(filepath.Base(clean), CgroupPrefix) {
		return fmt.Errorf("refusing to operate on cgroup %q: not a %s* child of %q", c.path, CgroupPrefix, c.mount)
	}
	return nil
}

// Path is the cgroup's directory, e.g.
// /sys/fs/cgroup/unified/socklb-lab-1234-1: what the agent attaches to.
func (c *Cgroup) Path() string { return c.path }

// FD is an open descriptor of the cgroup directory, for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}. Valid until Close.
func (c *Cgroup) FD() int { return int(c.dir.Fd()) }

// Procs lists the pids in the cgroup's cgroup.procs.
func (c *Cgroup) Procs() ([]int, error) {
	if err := c.checkOwn(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(c.path, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Close kills (SIGKILL) every process still in the cgroup, waits for it to
// empty, and removes it. Only processes this package started can be there:
// the cgroup is created fresh under a unique name and populated only by
// Client.Run (CLONE_INTO_CGROUP), so its members are those processes and
// their descendants. Idempotent.
func (c *Cgroup) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Cgroup) close() error {
	if err := c.checkOwn(); err != nil {
		return err
	}
	var errs []error
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := c.Procs()
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("cgroup %s: processes %v survive SIGKILL", c.path, pids))
			break
		}
		for _, pid := range pids {
			if pid == os.Getpid() {
				continue // never ourselves (we are not placed there)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.dir != nil {
		_ = c.dir.Close()
	}
	// rmdir can briefly return EBUSY while killed tasks finish exiting.
	for {
		err := os.Remove(c.path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			break
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}
