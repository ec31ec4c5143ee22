package datapath

import (
	"fmt"
	"math"
)

// idAllocator hands out 32-bit ids (0 is never used, so a zeroed value is
// recognisably unset). Freed ids are reused only after the counter wraps,
// so an id seen in a stale counter or log line rarely names a new object.
type idAllocator struct {
	used map[uint32]bool
	next uint32
	max  uint32
	wrap uint32 // ids run 1..wrap: twice max, so freed ids rest a while
}

func newIDAllocator(max uint32) *idAllocator {
	wrap := uint64(max) * 2
	if wrap > math.MaxUint32 {
		wrap = math.MaxUint32
	}
	return &idAllocator{used: map[uint32]bool{}, next: 1, max: max, wrap: uint32(wrap)}
}

func (a *idAllocator) reserve(id uint32) { a.used[id] = true }

func (a *idAllocator) free(id uint32) { delete(a.used, id) }

func (a *idAllocator) alloc() (uint32, error) {
	if uint32(len(a.used)) >= a.max {
		return 0, fmt.Errorf("all %d ids in use", a.max)
	}
	for {
		id := a.next
		a.next++
		if a.next == 0 || a.next > a.wrap {
			a.next = 1
		}
		if id != 0 && !a.used[id] {
			a.used[id] = true
			return id, nil
		}
	}
}

// resize lets the allocator hand out ids for a map grown to max entries;
// the ids in use stay valid.
func (a *idAllocator) resize(max uint32) {
	wrap := uint64(max) * 2
	if wrap > math.MaxUint32 {
		wrap = math.MaxUint32
	}
	a.max, a.wrap = max, uint32(wrap)
}
