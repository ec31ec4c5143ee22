package datapath

import "testing"

func TestIDAllocatorReusesOnlyAfterWrap(t *testing.T) {
	for _, max := range []uint32{4, 1 << 20, 1 << 31} {
		a := newIDAllocator(max)
		first, _ := a.alloc()
		second, _ := a.alloc()
		a.free(first)
		third, err := a.alloc()
		if err != nil || first != 1 || second != 2 || third != 3 {
			t.Errorf("max %d: ids %d, %d, then %d (%v) after freeing %d; want 1, 2, 3", max, first, second, third, err, first)
		}
	}
	a := newIDAllocator(2)
	a.alloc()
	a.alloc()
	if _, err := a.alloc(); err == nil {
		t.Error("a third id out of 2 was handed out")
	}
}
