package main

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestInParallelCoversEachIndexOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	err := inParallel(context.Background(), 4, 3, 1000, 42, func(lo, hi int) error {
		mu.Lock()
		defer mu.Unlock()
		for i := lo; i < hi; i++ {
			seen[i]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 1000; i++ {
		if seen[i] != 1 {
			t.Fatalf("index %d written %d times", i, seen[i])
		}
	}
	if len(seen) != 997 {
		t.Fatalf("%d indexes written, want 997", len(seen))
	}
	boom := errors.New("boom")
	if err := inParallel(context.Background(), 4, 0, 1000, 1, func(lo, _ int) error {
		if lo == 500 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the failing range's", err)
	}
}
