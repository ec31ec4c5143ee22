package datapath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const defaultBPFFS = "/sys/fs/bpf"

// ensureBPFFS makes sure path can hold pins. Hosts without systemd (and
// some container runtimes) leave /sys/fs/bpf unmounted; like Cilium, the
// agent mounts it there, and only there: any other location must already be
// a bpf filesystem the operator chose.
func ensureBPFFS(path string) error {
	if strings.HasPrefix(path+"/", defaultBPFFS+"/") && !isBPFFS(defaultBPFFS) {
		if err := os.MkdirAll(defaultBPFFS, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", defaultBPFFS, err)
		}
		if err := mountBPFFS(defaultBPFFS); err != nil {
			return fmt.Errorf("%s is not a bpf filesystem and mounting one there failed (%w): mount it with `mount -t bpf -o mode=0700 bpf %s`", defaultBPFFS, err, defaultBPFFS)
		}
	}
	if err := ensurePinDir(path); err != nil {
		return err
	}
	if !isBPFFS(path) {
		return fmt.Errorf("%s is not on a bpf filesystem: mount one (`mount -t bpf -o mode=0700 bpf DIR`) and pass a directory under it as --bpffs-path", path)
	}
	return nil
}

// mountBPFFS mounts a bpf filesystem private to root, as systemd mounts
// /sys/fs/bpf. Without mode= the kernel gives its root 1777, and any user
// of the node may then pin objects there and squat on the names other BPF
// software expects.
func mountBPFFS(dir string) error {
	return unix.Mount("bpf", dir, "bpf", 0, "mode=0700")
}

// ensurePinDir creates dir (and missing parents) 0700, or checks that an
// existing one is a directory of this user (root) that nobody else may
// enter: whoever can write in it can replace a pinned map or link, and so
// the translations of every socket on the node.
func ensurePinDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking pin directory %s: %w", dir, err)
	}
	return checkPinDir(dir, fi)
}

// checkPinDir is ensurePinDir's check of an existing directory.
func checkPinDir(dir string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("pin directory %s is not a directory (a symlink or a file): remove it and restart, or pass another --bpffs-path", dir)
	}
	uid := uint32(os.Geteuid())
	if fi.Mode().Perm() != 0o700 || st.Uid != uid {
		return fmt.Errorf("pin directory %s has mode %04o and owner uid %d; socklb's pins must be private to uid %d (mode 0700): "+
			"fix it with `chown %d %s && chmod 0700 %s` if you trust what it holds, or remove it (`socklb cleanup --bpffs-path ...`) and restart",
			dir, fi.Mode().Perm(), st.Uid, uid, uid, dir, dir)
	}
	return nil
}

func isBPFFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(filepath.Clean(path), &st) == nil && st.Type == unix.BPF_FS_MAGIC
}
