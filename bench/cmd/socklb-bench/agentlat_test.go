package main

import (
	"math"
	"testing"
)

// TestQuantileFromBuckets: quantiles of cumulative buckets, interpolated
// as Prometheus's histogram_quantile interpolates them, read from a
// scraped body and taken over the observations between two scrapes.
func TestQuantileFromBuckets(t *testing.T) {
	before := `# TYPE socklb_event_to_programmed_duration_seconds histogram
socklb_event_to_programmed_duration_seconds_bucket{le="0.001"} 10
socklb_event_to_programmed_duration_seconds_bucket{le="0.002"} 10
socklb_event_to_programmed_duration_seconds_bucket{le="0.004"} 10
socklb_event_to_programmed_duration_seconds_bucket{le="+Inf"} 10
socklb_event_to_programmed_duration_seconds_sum 0.005
socklb_event_to_programmed_duration_seconds_count 10
`
	// 100 more: 50 under 1 ms, 40 in (1, 2], 9 in (2, 4], 1 above.
	after := `socklb_event_to_programmed_duration_seconds_bucket{le="0.001"} 60
socklb_event_to_programmed_duration_seconds_bucket{le="0.002"} 100
socklb_event_to_programmed_duration_seconds_bucket{le="0.004"} 109
socklb_event_to_programmed_duration_seconds_bucket{le="+Inf"} 110
`
	b0, err := histogram(before, agentLatencyMetric)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := histogram(after, agentLatencyMetric)
	if err != nil {
		t.Fatal(err)
	}
	d, err := since(b1, b0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ q, want float64 }{
		{0.5, 0.001},    // rank 50: the top of the first bucket
		{0.25, 0.0005},  // rank 25 of 50 in [0, 1 ms]
		{0.7, 0.0015},   // rank 70: 20 of 40 into (1, 2]
		{0.95, 0.00311}, // rank 95: 5 of 9 into (2, 4] -> 2 + 2*5/9 ms
		{0.999, 0.004},  // rank 99.9, in +Inf: the highest finite bound
	} {
		if got := quantile(tc.q, d); math.Abs(got-tc.want) > 1e-5 {
			t.Errorf("q%.3f = %.6f, want %.6f", tc.q, got, tc.want)
		}
	}
	if got := quantile(0.5, []bucket{{0.001, 0}, {math.Inf(1), 0}}); !math.IsNaN(got) {
		t.Errorf("no observations: %v, want NaN", got)
	}
	if _, err := since(b1[:2], b0); err == nil {
		t.Error("buckets that changed between scrapes: no error")
	}
}
