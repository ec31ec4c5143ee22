package datapath

import (
	"errors"

	"golang.org/x/sys/unix"
)

// isFull reports the kernel's "no room" answers for map updates: E2BIG from
// hash maps at max_entries, ENOMEM when a non-preallocated element cannot be
// allocated.
func isFull(err error) bool {
	return errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC)
}
