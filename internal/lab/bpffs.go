package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// BPFFS is a private bpf filesystem instance mounted in a temporary
// directory, so labs never pin into the host's /sys/fs/bpf. Unmounting it
// drops every pin left inside, which also detaches pinned links.
type BPFFS struct {
	mnt string
}

func NewBPFFS() (*BPFFS, error) {
	mnt, err := os.MkdirTemp("", "socklb-bpffs-")
	if err != nil {
		return nil, err
	}
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(mnt)
		return nil, fmt.Errorf("mounting a bpf filesystem at %s: %w", mnt, err)
	}
	return &BPFFS{mnt: mnt}, nil
}

// Path is a directory to pass as --bpffs-path (created by the agent).
func (b *BPFFS) Path() string { return filepath.Join(b.mnt, "socklb") }

func (b *BPFFS) Close() error {
	if b.mnt == "" {
		return nil
	}
	err := unix.Unmount(b.mnt, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmounting %s: %w", b.mnt, err)
	}
	err = os.Remove(b.mnt)
	b.mnt = ""
	return err
}
