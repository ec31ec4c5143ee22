package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BPFFS is a private bpf filesystem instance mounted in a temporary
// directory, so tests never pin into the host's /sys/fs/bpf. Unmounting it
// drops every pin left inside, which also detaches pinned links.
type BPFFS struct {
	mnt string
}

// NewBPFFS mounts a fresh bpffs; the caller closes it.
func NewBPFFS() (*BPFFS, error) {
	mnt, err := os.MkdirTemp("", "socklb-bpffs-")
	if err != nil {
		return nil, err
	}
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(mnt)
		return nil, fmt.Errorf("mounting a bpf filesystem at %s (needs root): %w", mnt, err)
	}
	return &BPFFS{mnt: mnt}, nil
}

// PrivateBPFFS is NewBPFFS for one test: it fails the test when the mount
// fails and unmounts at the end, also when the test fails.
func PrivateBPFFS(t testing.TB) *BPFFS {
	t.Helper()
	fs, err := NewBPFFS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Close(); err != nil {
			t.Error(err)
		}
	})
	return fs
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
