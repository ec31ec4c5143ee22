package datapath

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountedBPFFSIsPrivate: the bpffs the agent mounts itself (when
// /sys/fs/bpf is not mounted) is 0700 at its root, not the kernel's 1777.
func TestMountedBPFFSIsPrivate(t *testing.T) {
	requireRoot(t)
	mnt := t.TempDir()
	if err := mountBPFFS(mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	fi, err := os.Stat(mnt)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel always adds the sticky bit to a bpffs root; what counts
	// is that nobody but root may create pins in it.
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Fatalf("bpffs root mode %v, want rwx------ (the kernel's default is 1777: anyone may pin there)", fi.Mode())
	}
}

// TestPinDirModeChecked: pin directories are created 0700, and an existing
// one another user owns or others may enter is refused, naming the path
// and the fix, before anything is loaded or pinned into it.
func TestPinDirModeChecked(t *testing.T) {
	requireRoot(t)
	d := openTest(t, Config{})
	for _, dir := range []string{d.cfg.BPFFSPath, mapsDir(d.cfg.BPFFSPath), d.pinDir} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s created with mode %o, want 0700", dir, fi.Mode().Perm())
		}
	}

	for _, tc := range []struct {
		name string
		prep func(dir string) error
		want string
	}{
		{"group and world may enter", func(dir string) error { return os.Chmod(dir, 0o755) }, "has mode 0755"},
		{"world-writable", func(dir string) error { return os.Chmod(dir, 0o777) }, "has mode 0777"},
		{"owned by another user", func(dir string) error { return os.Chown(dir, 1000, 1000) }, "owner uid 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := pinDir(t)
			maps := mapsDir(dir)
			if err := os.MkdirAll(maps, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.prep(maps); err != nil {
				t.Fatal(err)
			}
			d, err := Open(Config{BPFFSPath: dir})
			if err == nil {
				d.Close()
				t.Fatalf("Open accepted pin directory %s (%s)", maps, tc.name)
			}
			for _, w := range []string{maps, tc.want, "chmod 0700 " + maps} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if entries, _ := os.ReadDir(maps); len(entries) != 0 {
				t.Errorf("maps were pinned into the refused directory: %v", entries)
			}
			_ = os.Chmod(maps, 0o700)
			_ = os.Chown(maps, 0, 0)
		})
	}
}
