package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultLockTimeout is how long a second agent waits for the pin
// directory: a rolling update with a surge starts the new pod while the
// old one drains (30 s of terminationGracePeriodSeconds by default), and
// the liveness probe of deploy/ gives up after about 70 s.
const DefaultLockTimeout = 60 * time.Second

// pinLock is an exclusive flock(2) on the pin directory itself: bpffs
// holds no regular files, but a directory can be locked, and every
// process that sees the pins (the DaemonSet's pod, an agent started by
// hand on the host) sees the same directory. Two agents on one pin
// directory would each allocate ids for the same maps and sweep what
// the other wrote; the kernel drops the lock when the holder exits, even
// on kill -9.
type pinLock struct {
	f *os.File
}

// errLocked says another process holds the pin directory.
var errLocked = errors.New("locked by another process")

// tryLock takes the lock on dir without waiting.
func tryLock(dir string) (*pinLock, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening pin directory %s to lock it: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("locking pin directory %s: %w", dir, err)
	}
	return &pinLock{f: f}, nil
}

// lockPins takes the lock on dir, waiting up to timeout for another agent
// to release it; wait is called once, when it has to.
func lockPins(dir string, timeout time.Duration, wait func(holder string)) (*pinLock, error) {
	deadline := time.Now().Add(timeout)
	for waited := false; ; waited = true {
		l, err := tryLock(dir)
		if !errors.Is(err, errLocked) {
			return l, err
		}
		if !waited && wait != nil {
			wait(lockHolder(dir))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("another socklb agent (%s) has held pin directory %s for %s: two agents on one set of maps would overwrite each other. "+
				"Stop it (a hand-started `socklb agent`, or a pod that did not terminate), or raise --lock-timeout if it is an old pod still draining", lockHolder(dir), dir, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *pinLock) release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the last descriptor drops the flock
		l.f = nil
	}
}

// sameDir reports whether dir is still the directory the lock is on: one
// removed and made again (`socklb cleanup --force`, a hand `rm -r`) is a
// new directory, and the lock no longer keeps anyone out of it.
func (l *pinLock) sameDir(dir string) bool {
	var held, now unix.Stat_t
	if unix.Fstat(int(l.f.Fd()), &held) != nil || unix.Stat(dir, &now) != nil {
		return false
	}
	return held.Dev == now.Dev && held.Ino == now.Ino
}

// lockHolder names the process holding a flock on dir, from /proc/locks,
// or says it is unknown (another pid namespace shows no pid we can read).
func lockHolder(dir string) string {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return "holder unknown"
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return "holder unknown"
	}
	defer f.Close()
	// "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF": device in hex,
	// inode in decimal.
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 6 && fs[1] == "FLOCK" && fs[5] == want {
			pid := fs[4]
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			if c := strings.TrimSpace(string(comm)); c != "" {
				return "pid " + pid + ", " + c
			}
			return "pid " + pid
		}
	}
	return "holder unknown"
}
