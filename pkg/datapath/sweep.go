package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// sweep deletes every key of m that keep rejects. Keys are collected first:
// deleting while iterating a hash map can restart or skip the iteration.
func sweep[K comparable](m *ebpf.Map, keep func(K) bool) error {
	var dead []K
	var prev any // nil asks the kernel for the first key
	for {
		var k K
		err := m.NextKey(prev, &k)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("iterating %s: %w", m, err)
		}
		if !keep(k) {
			dead = append(dead, k)
		}
		prev = k
	}
	for _, k := range dead {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting stale entry from %s: %w", m, err)
		}
	}
	return nil
}
