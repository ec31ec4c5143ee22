package datapath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
		if err := unix.Mount("bpf", defaultBPFFS, "bpf", 0, ""); err != nil {
			return fmt.Errorf("%s is not a bpf filesystem and mounting one there failed (%w): mount it with `mount -t bpf bpf %s`", defaultBPFFS, err, defaultBPFFS)
		}
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("creating pin directory %s: %w", path, err)
	}
	if !isBPFFS(path) {
		return fmt.Errorf("%s is not on a bpf filesystem: mount one (`mount -t bpf bpf DIR`) and pass a directory under it as --bpffs-path", path)
	}
	return nil
}

func isBPFFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(filepath.Clean(path), &st) == nil && st.Type == unix.BPF_FS_MAGIC
}
