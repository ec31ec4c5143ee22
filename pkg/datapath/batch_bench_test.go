package datapath

import (
	"fmt"
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/socklb/socklb/pkg/servicemap"
)

// BenchmarkFirstFill times the first Apply of 10 000 Services of 10
// endpoints into empty maps (420 000 entries) on the per-entry path and
// on the batch path, in one run, so the machine's load weighs on both
// alike: wall and CPU seconds per fill on each path, and their ratios.
// Needs root
// (it loads the maps); it skips and says so otherwise.
//
//	go test -run '^$' -bench BenchmarkFirstFill -benchtime 3x ./pkg/datapath/
func BenchmarkFirstFill(b *testing.B) {
	requireRoot(b)
	want := servicemap.State{}
	for i := 0; i < 10000; i++ {
		var backends []string
		for j := 0; j < 10; j++ {
			k := i*10 + j
			backends = append(backends, fmt.Sprintf("10.%d.%d.%d:8080", 64+k>>16, k>>8&255, k&255))
		}
		fe := frontend(fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), 80, servicemap.TCP, backends...)
		want[fe.Key] = fe
	}
	type cost struct{ wall, cpu time.Duration }
	fill := func(min int) cost {
		b.StopTimer()
		d := openTest(b, Config{})
		defer d.Close()
		d.batch.min = min
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU(b)
		res := d.Apply(want)
		took := cost{time.Since(start), processCPU(b) - cpu0}
		b.StopTimer()
		if err := res.Err(); err != nil {
			b.Fatalf("Apply: %v", err)
		}
		if batched := res.Batched == len(want); batched != (min != math.MaxInt) {
			b.Fatalf("Apply batched %d of %d frontends with batch.min %d", res.Batched, len(want), min)
		}
		return took
	}
	var perEntry, batch cost
	add := func(sum *cost, c cost) { sum.wall += c.wall; sum.cpu += c.cpu }
	for i := 0; i < b.N; i++ {
		// Alternated: the kernel frees the last fill's maps in the
		// background, and the load of 2 shared CPUs drifts.
		if i%2 == 0 {
			add(&perEntry, fill(math.MaxInt))
			add(&batch, fill(batchMinFrontends))
		} else {
			add(&batch, fill(batchMinFrontends))
			add(&perEntry, fill(math.MaxInt))
		}
	}
	n := float64(b.N)
	b.ReportMetric(perEntry.wall.Seconds()/n, "per-entry-s")
	b.ReportMetric(batch.wall.Seconds()/n, "batch-s")
	b.ReportMetric(perEntry.cpu.Seconds()/n, "per-entry-cpu-s")
	b.ReportMetric(batch.cpu.Seconds()/n, "batch-cpu-s")
	b.ReportMetric(float64(perEntry.wall)/float64(batch.wall), "speedup")
	b.ReportMetric(float64(perEntry.cpu)/float64(batch.cpu), "cpu-speedup")
}

// processCPU is the user and system time of this process: on a shared
// machine it moves less with the load than the wall clock does.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
