package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// peakRSS exports socklb_process_peak_resident_memory_bytes, the kernel's
// high-water mark of the agent's resident memory (VmHWM).
// process_resident_memory_bytes is the figure at the scrape: a full
// resync's peak is gone by the next one, and the pod's memory limit must
// hold the peak, not the steady figure.
func peakRSS(statusPath string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "socklb_process_peak_resident_memory_bytes",
		Help: "Highest resident memory of the agent since it started (VmHWM of /proc/self/status); size the pod's memory limit by it.",
	}, func() float64 {
		b, err := os.ReadFile(statusPath)
		if err != nil {
			return math.NaN()
		}
		v, err := vmHWM(b)
		if err != nil {
			return math.NaN()
		}
		return float64(v)
	})
}

// vmHWM reads the VmHWM line of a /proc/<pid>/status, which the kernel
// writes in kB, as bytes.
func vmHWM(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		kb, err := strconv.ParseUint(num, 10, 64)
		if err != nil || unit != "kB" {
			return 0, fmt.Errorf("reading VmHWM %q: want a number of kB", rest)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmHWM line (a kernel thread, or not Linux)")
}
