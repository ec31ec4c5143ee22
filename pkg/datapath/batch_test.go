package datapath

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// batchState is n Services with 0..12 backends, both families, TCP and
// UDP, affinity and local-only among them, every seventh with a second
// frontend of the same Service port (a NodePort: one affinity group).
func batchState(n int) servicemap.State {
	s := servicemap.State{}
	for i := 0; i < n; i++ {
		vip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		proto := servicemap.TCP
		if i%3 == 0 {
			proto = servicemap.UDP
		}
		if i%11 == 0 {
			vip = fmt.Sprintf("fd00::%x", i+1)
		}
		var backends []string
		for j := 0; j < i%13; j++ {
			if i%11 == 0 {
				backends = append(backends, fmt.Sprintf("[fd00:244::%x:%x]:8080", i, j+1))
			} else {
				backends = append(backends, fmt.Sprintf("10.244.%d.%d:8080", i%200, j+1))
			}
		}
		fe := frontend(vip, 80, proto, backends...)
		if i%5 == 0 {
			fe.Affinity = 3 * time.Hour
		}
		fe.LocalOnly = i%4 == 0
		s[fe.Key] = fe
		if i%7 == 0 && i%11 != 0 {
			np := fe
			np.Key = servicemap.FrontendKey{Addr: netip.MustParseAddr("192.168.0.1"), Port: uint16(30000 + i), Proto: proto}
			s[np.Key] = np
		}
	}
	return s
}

// TestBatchFillEqualsPerEntry: the first fill written with batch updates
// leaves every Service map byte for byte as the per-entry path does, ids
// included, over chunks that split the state unevenly.
func TestBatchFillEqualsPerEntry(t *testing.T) {
	want := batchState(300)
	cfg := Config{MaxServices: 1024, MaxBackends: 8192}

	ref := perEntryFill(t, cfg, want)

	d := openTest(t, cfg)
	d.batch.chunk = 37
	res := mustApply(t, d, want)
	if res.Batched != len(want) || res.Upserted != len(want) {
		t.Fatalf("Apply wrote %d frontends, %d of them batched; want all %d batched", res.Upserted, res.Batched, len(want))
	}

	sameMaps(t, d, ref)
	if got, exp := d.Programmed(), ref.Programmed(); !reflect.DeepEqual(got, exp) {
		t.Errorf("the batch fill's record of the frontends differs from the per-entry one")
	}
	// What the batch wrote is an ordinary generation: changing and
	// removing it takes the per-entry path.
	keys := slices.SortedFunc(maps.Keys(want), compareKeys)
	for _, k := range keys[:10] {
		delete(want, k)
	}
	fe := want[keys[20]]
	fe.Backends = fe.Backends[:0]
	want[fe.Key] = fe
	if res := mustApply(t, d, want); res.Removed != 10 || res.Upserted != 1 || res.Batched != 0 {
		t.Errorf("second Apply: %+v, want 10 removed, 1 upserted, none batched", res)
	}
}

// TestBatchChunkFailureNamesFrontends: when a chunk's batch write hits a
// full map, the chunk goes per entry: the frontends that fit are
// programmed, the one that does not is named with the map and the flag,
// and nothing of it is left in any map.
func TestBatchChunkFailureNamesFrontends(t *testing.T) {
	d := openTest(t, Config{})
	// The id allocators guard every map at its configured size, so only a
	// map smaller than its flag says can make the kernel refuse: members
	// with room for 27 of the 30 backends below (UDP frontends: a TCP
	// ClusterIP without sessionAffinity writes no members).
	real := d.t.members
	small, err := ebpf.NewMap(&ebpf.MapSpec{Type: real.Type(), KeySize: real.KeySize(), ValueSize: real.ValueSize(), MaxEntries: 27})
	if err != nil {
		t.Fatalf("creating a small members map: %v", err)
	}
	t.Cleanup(func() { small.Close() })
	d.t.members = small
	d.batch.chunk, d.batch.min = 4, 1

	want := servicemap.State{}
	var fes []servicemap.Frontend
	for i := 0; i < 10; i++ {
		fe := frontend(fmt.Sprintf("10.96.0.%d", i+1), 80, servicemap.UDP,
			fmt.Sprintf("10.244.%d.1:80", i), fmt.Sprintf("10.244.%d.2:80", i), fmt.Sprintf("10.244.%d.3:80", i))
		want[fe.Key] = fe
		fes = append(fes, fe)
	}
	res := d.Apply(want)
	// Chunks of 4: two fit (24 members); the third (frontends 9 and 10)
	// fails in the batch, then frontend 9 fits per entry and 10 does not.
	if res.Batched != 8 || res.Upserted != 9 || len(res.Failed) != 1 {
		t.Fatalf("Apply: %d upserted, %d batched, failed %v; want 9, 8 and the last frontend", res.Upserted, res.Batched, res.Err())
	}
	if res.BatchFallback == nil || !strings.Contains(res.BatchFallback.Error(), "members") {
		t.Errorf("BatchFallback %v: want why the third chunk went per entry (the members map)", res.BatchFallback)
	}
	last := fes[9].Key
	err = res.Failed[last]
	if err == nil {
		t.Fatalf("failures name %v, not %s", res.Err(), last)
	}
	for _, want := range []string{last.String(), "members map is full", "--max-backends"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if me := (*MapError)(nil); !errors.As(err, &me) || me.Map != socklbbpf.SocklbMapMembers {
		t.Errorf("error %q carries no MapError naming the members map", err)
	}
	prog := d.Programmed()
	for _, fe := range fes[:9] {
		if got, ok := prog[fe.Key]; !ok || !got.Frontend.Equal(fe) {
			t.Errorf("%s not programmed", fe.Key)
		}
	}
	if _, ok := prog[last]; ok {
		t.Errorf("%s recorded as programmed", last)
	}
	// Nothing of the failed frontend, nor of the chunk's undone batch,
	// is left behind.
	for name, n := range map[string]int{
		socklbbpf.SocklbMapServices: 9, socklbbpf.SocklbMapSvcNames: 9, socklbbpf.SocklbMapSlots: 27,
		socklbbpf.SocklbMapBackends: 27, socklbbpf.SocklbMapMembers: 27,
	} {
		if got := len(rawDump(t, *mapFields(&d.t)[name])); got != n {
			t.Errorf("%s map holds %d entries, want %d", name, got, n)
		}
	}
}

// rawDump reads every entry of m as hex, whatever its types.
func rawDump(t *testing.T, m *ebpf.Map) map[string]string {
	t.Helper()
	vsize := int(m.ValueSize())
	ncpu := 1
	if m.Type() == ebpf.PerCPUHash {
		ncpu = ebpf.MustPossibleCPU()
		vsize = (vsize + 7) / 8 * 8
	}
	keys := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(int(m.KeySize()), reflect.TypeOf(byte(0)))), batchSize, batchSize)
	vals := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(vsize, reflect.TypeOf(byte(0)))), batchSize*ncpu, batchSize*ncpu)
	out := map[string]string{}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys.Interface(), vals.Interface(), nil)
		for i := 0; i < n; i++ {
			var v strings.Builder
			for c := 0; c < ncpu; c++ {
				fmt.Fprintf(&v, "%x ", vals.Index(i*ncpu+c).Interface())
			}
			out[fmt.Sprintf("%x", keys.Index(i).Interface())] = v.String()
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out
		}
		if err != nil {
			t.Fatalf("dumping %s: %v", m, err)
		}
	}
}

// TestBatchRefusedMapWrittenPerEntry: the kernel's "no batch for this
// map" answers are told from a full map, and a map marked refused is
// written per entry by the batch path (per-CPU stats included) exactly as
// upsert writes it.
func TestBatchRefusedMapWrittenPerEntry(t *testing.T) {
	for _, c := range []struct {
		err     error
		refused bool
	}{
		{fmt.Errorf("batch update: %w", ebpf.ErrNotSupported), true},
		{fmt.Errorf("batch update: %w", unix.EINVAL), true},
		{enotsupp, true},
		{fmt.Errorf("batch update: %w", unix.E2BIG), false},
		{unix.ENOMEM, false},
	} {
		if got := batchRefused(c.err); got != c.refused {
			t.Errorf("batchRefused(%v) = %v, want %v", c.err, got, c.refused)
		}
	}

	want := batchState(100)
	cfg := Config{MaxServices: 1024, MaxBackends: 8192}
	ref := perEntryFill(t, cfg, want)
	d := openTest(t, cfg)
	for _, def := range fillOrder() {
		d.batch.refused[def.name] = ebpf.ErrNotSupported
	}
	if res := mustApply(t, d, want); res.Batched != len(want) {
		t.Fatalf("%d of %d frontends through the batch path", res.Batched, len(want))
	}
	sameMaps(t, d, ref)
}

// TestFillOrder: the batch fill writes what a services entry leads to
// before it: services last, slots after the backends and stats they point
// at, one rank per map so the order never depends on the table's.
func TestFillOrder(t *testing.T) {
	order := fillOrder()
	pos := map[string]int{}
	ranks := map[int]string{}
	for i, def := range order {
		pos[def.name] = i
		if other, ok := ranks[def.fill]; ok {
			t.Errorf("maps %s and %s share fill rank %d", other, def.name, def.fill)
		}
		ranks[def.fill] = def.name
	}
	batched := 0
	for _, name := range serviceMaps() {
		if def, _ := mapDefOf(name); !def.perEntry {
			batched++
		}
	}
	if len(order) != batched {
		t.Errorf("fillOrder has %d maps, Apply batch-fills %d", len(order), batched)
	}
	if pos[socklbbpf.SocklbMapServices] != len(order)-1 {
		t.Errorf("services is written at %d of %d: a connect could find a Service whose slots are missing", pos[socklbbpf.SocklbMapServices], len(order))
	}
	for _, before := range []string{socklbbpf.SocklbMapBackends, socklbbpf.SocklbMapStats} {
		if pos[before] > pos[socklbbpf.SocklbMapSlots] {
			t.Errorf("%s is written after slots: a slot could point at a missing backend", before)
		}
	}
}

// perEntryFill is the reference a batch fill is held to: want written
// frontend by frontend through ApplyDelta, in key order, as batches
// allocate ids.
func perEntryFill(t *testing.T, cfg Config, want servicemap.State) *Datapath {
	t.Helper()
	ref := openTest(t, cfg)
	for _, k := range slices.SortedFunc(maps.Keys(want), compareKeys) {
		if err := ref.ApplyDelta(servicemap.Delta{Upsert: servicemap.State{k: want[k]}}).Err(); err != nil {
			t.Fatalf("per-entry ApplyDelta: %v", err)
		}
	}
	return ref
}

// sameMaps fails the test unless every Service map of d holds, byte for
// byte, what ref's does.
func sameMaps(t *testing.T, d, ref *Datapath) {
	t.Helper()
	for _, def := range fillOrder() {
		got, exp := rawDump(t, *mapFields(&d.t)[def.name]), rawDump(t, *mapFields(&ref.t)[def.name])
		if len(exp) == 0 {
			t.Fatalf("%s map empty after the per-entry fill: the test compares nothing", def.name)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("%s map: the batch path's fill holds %d entries, per-entry %d, and they differ", def.name, len(got), len(exp))
			for k, v := range exp {
				if got[k] != v {
					t.Errorf("  %s key %s: batch %q, per-entry %q", def.name, k, got[k], v)
					break
				}
			}
		}
	}
}
