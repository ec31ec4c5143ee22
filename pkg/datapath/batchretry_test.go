package datapath

import (
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// partialWrites answers BatchUpdate from a script, as the kernel does: a
// count of entries taken, and the error that stopped it. It records the
// keys and the number of values of each call.
type partialWrites struct {
	script []struct {
		n   int
		err error
	}
	keys [][]uint32
	vals []int
}

func (p *partialWrites) BatchUpdate(keys, values any, _ *ebpf.BatchOptions) (int, error) {
	p.keys = append(p.keys, slices.Clone(keys.([]uint32)))
	p.vals = append(p.vals, len(values.([]uint64)))
	if len(p.keys) > len(p.script) {
		return 0, errors.New("called more often than scripted")
	}
	s := p.script[len(p.keys)-1]
	return s.n, s.err
}

// TestWriteBatchResumesAfterENOMEM: a batch the kernel stopped with ENOMEM
// goes on from the first entry it did not take (per-CPU values by their
// stride), gives up after nine tries, and does not retry other errors.
func TestWriteBatchResumesAfterENOMEM(t *testing.T) {
	type call = struct {
		n   int
		err error
	}
	enomem := call{0, unix.ENOMEM}
	cases := []struct {
		name      string
		perCPU    int
		script    []call
		wantDone  int
		wantErr   error
		wantFirst []uint32 // the first key of each call
		wantVals  []int    // the values handed to each call
	}{
		{name: "all at once", script: []call{{6, nil}},
			wantDone: 6, wantFirst: []uint32{0}, wantVals: []int{6}},
		{name: "resumes where it stopped", script: []call{{2, unix.ENOMEM}, {0, unix.ENOMEM}, {3, unix.ENOMEM}, {1, nil}},
			wantDone: 6, wantFirst: []uint32{0, 2, 2, 5}, wantVals: []int{6, 4, 4, 1}},
		{name: "gives up after nine tries", script: []call{{1, unix.ENOMEM}, enomem, enomem, enomem, enomem, enomem, enomem, enomem, enomem},
			wantDone: 1, wantErr: unix.ENOMEM, wantFirst: []uint32{0, 1, 1, 1, 1, 1, 1, 1, 1}, wantVals: []int{6, 5, 5, 5, 5, 5, 5, 5, 5}},
		{name: "other errors are not retried", script: []call{{3, unix.E2BIG}},
			wantDone: 3, wantErr: unix.E2BIG, wantFirst: []uint32{0}, wantVals: []int{6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &entries[uint32, uint64]{}
			for k := uint32(0); k < 6; k++ {
				e.add(k, 0)
			}
			m := &partialWrites{script: tc.script}
			done, err := e.writeBatch(m)
			if done != tc.wantDone || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("writeBatch = %d, %v; want %d, %v", done, err, tc.wantDone, tc.wantErr)
			}
			var first []uint32
			for _, ks := range m.keys {
				first = append(first, ks[0])
			}
			if !slices.Equal(first, tc.wantFirst) || !slices.Equal(m.vals, tc.wantVals) {
				t.Errorf("calls began at keys %v with %v values; want %v with %v", first, m.vals, tc.wantFirst, tc.wantVals)
			}
		})
	}
}
