package node

import (
	"testing"
	"time"
)

func TestParseStalls(t *testing.T) {
	log := `2026-12-02T00:58:40,000001+00:00 cni0: port 3(veth9f144da9) entered disabled state
2026-12-02T00:58:55,145043+00:00 watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [nft:25368]
2026-12-02T00:59:55,145010+00:00 watchdog: BUG: soft lockup - CPU#0 stuck for 75s! [nft:25496]
2026-12-02T01:30:00,000000+00:00 watchdog: BUG: soft lockup - CPU#0 stuck for 30s! [x:1]
2026-12-02T00:59:00,000000+00:00 INFO: task kubelet:123 blocked for more than 120 seconds.
not a line
`
	from := time.Date(2026, 12, 2, 0, 57, 31, 0, time.UTC)
	to := time.Date(2026, 12, 2, 1, 2, 7, 0, time.UTC)
	got := parseStalls(log, from, to)
	want := []string{
		"2026-12-02T00:58:55Z watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [nft:25368]",
		"2026-12-02T00:59:55Z watchdog: BUG: soft lockup - CPU#0 stuck for 75s! [nft:25496]",
		"2026-12-02T00:59:00Z INFO: task kubelet:123 blocked for more than 120 seconds.",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}
