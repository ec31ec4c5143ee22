package agent

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestVMHWM(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         uint64
		err          bool
	}{
		{"kB to bytes", "Name:\tsocklb\nVmPeak:\t 2000 kB\nVmHWM:\t  1234 kB\nVmRSS:\t 1000 kB\n", 1234 * 1024, false},
		{"no line", "Name:\tkthreadd\nState:\tS (sleeping)\n", 0, true},
		{"another unit", "VmHWM:\t1 MB\n", 0, true},
		{"not a number", "VmHWM:\tlots kB\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vmHWM([]byte(tc.status))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("vmHWM = %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestPeakRSSAtLeastRSS: the exported peak is this process's real VmHWM,
// never below what it holds now.
func TestPeakRSSAtLeastRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc/self/status (Linux)")
	}
	hold := make([]byte, 64<<20)
	for i := range hold {
		hold[i] = 1
	}
	// VmRSS first: the peak read after it cannot be lower.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var rssKB float64
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			n, _ := vmHWM([]byte("VmHWM: " + f[1] + " kB"))
			rssKB = float64(n)
		}
	}
	peak := testutil.ToFloat64(peakRSS("/proc/self/status"))
	if peak < 64<<20 || peak < rssKB {
		t.Errorf("peak resident memory %.0f bytes, with 64 MiB touched and VmRSS %.0f bytes", peak, rssKB)
	}
	_ = hold[len(hold)-1]
}
