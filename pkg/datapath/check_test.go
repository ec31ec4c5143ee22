package datapath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenChecksBeforeCreating: a bpffs path that is not on bpffs, or a
// cgroup that is not cgroup2, fails Open naming the path and the fix
// before it creates anything: no pin directory, no map pinned. Checked
// after the act, the first leaves the directory ensurePinDir made, the
// second the maps loadObjects pinned before attachHooks found the cgroup.
func TestOpenChecksBeforeCreating(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) Config
		want []string
	}{
		{"bpffs path on another filesystem", func(t *testing.T) Config {
			return Config{BPFFSPath: filepath.Join(t.TempDir(), "pins")}
		}, []string{"--bpffs-path", "is not on a bpf filesystem", "mount -t bpf"}},
		{"cgroup not on cgroup2", func(t *testing.T) Config {
			return Config{BPFFSPath: pinDir(t), CgroupPath: t.TempDir()}
		}, []string{"is not a cgroup v2 directory", "--cgroup-path"}},
		{"cgroup missing", func(t *testing.T) Config {
			return Config{BPFFSPath: pinDir(t), CgroupPath: filepath.Join(t.TempDir(), "missing")}
		}, []string{"--cgroup-path", "does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			d, err := Open(cfg)
			if err == nil {
				d.Close()
				t.Fatalf("Open(%+v) accepted it", cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, serr := os.Lstat(cfg.BPFFSPath); serr == nil {
				entries, _ := os.ReadDir(cfg.BPFFSPath)
				t.Errorf("Open failed (%v) after creating %s (holding %d entries)", err, cfg.BPFFSPath, len(entries))
			}
		})
	}
}

// TestCheckBPFFS: where ensureBPFFS would succeed, checkBPFFS says so
// without creating the directory; where it would fail, it says why.
func TestCheckBPFFS(t *testing.T) {
	requireRoot(t)
	mnt := filepath.Dir(pinDir(t))
	for _, tc := range []struct {
		name, path, want string
	}{
		{"a new directory on bpffs", filepath.Join(mnt, "a", "b"), ""},
		// Mounted by ensureBPFFS if it is not: nothing to refuse.
		{"under /sys/fs/bpf", filepath.Join(defaultBPFFS, "socklb-check-test-does-not-exist"), ""},
		{"on another filesystem", filepath.Join(t.TempDir(), "pins"), "is not on a bpf filesystem"},
		{"under a file", filepath.Join(os.Args[0], "pins"), "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBPFFS(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkBPFFS(%s): %v", tc.path, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkBPFFS(%s): %v, want an error containing %q", tc.path, err, tc.want)
			}
			if _, err := os.Lstat(tc.path); err == nil {
				t.Errorf("checkBPFFS created %s", tc.path)
			}
		})
	}
}
