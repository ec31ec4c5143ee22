package datapath

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// isFull reports the kernel's answer for a hash map at max_entries.
func isFull(err error) bool {
	return errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC)
}

// put writes a map entry, riding out ENOMEM: elements of maps that are not
// preallocated (per-CPU ones above all) come from caches the kernel refills
// asynchronously, and a burst of updates (the first sync of 100 000
// backends) can drain them for a moment. That is not a full map.
func put(write func() error) error {
	backoff := 100 * time.Microsecond
	for i := 0; ; i++ {
		err := write()
		if err == nil || !errors.Is(err, unix.ENOMEM) || i == 8 {
			return err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}
