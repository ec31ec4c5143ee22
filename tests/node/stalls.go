package node

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// stallMarks are the kernel's words for a CPU or a task that made no
// progress: the soft-lockup watchdog, the hung-task detector and RCU's
// stall detector. This machine has 2 CPUs shared with other work and a
// kernel without preemption: a soft lockup on both CPUs freezes every
// process of the run, kubelets included (finding 9: two `nft` processes,
// not the run's, held both CPUs in nf_tables for ~75 s; a Node went
// NotReady and a test's loop outlived its pod's grace period).
var stallMarks = []string{"soft lockup", "blocked for more than", "rcu_sched self-detected stall", "rcu_preempt self-detected stall", "detected stalls on CPUs"}

// KernelStalls returns the kernel log lines that report a stall between
// from and to (`dmesg --time-format=iso`), so that a run's record says when
// the machine, not the proxy under test, stopped.
func KernelStalls(from, to time.Time) ([]string, error) {
	out, err := exec.Command("dmesg", "--time-format=iso").Output()
	if err != nil {
		return nil, fmt.Errorf("dmesg: %w", err)
	}
	return parseStalls(string(out), from, to), nil
}

func parseStalls(log string, from, to time.Time) []string {
	var found []string
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		stamp, msg, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		// 2026-12-02T00:58:55,145043+00:00
		t, err := time.Parse("2006-01-02T15:04:05,000000-07:00", stamp)
		if err != nil || t.Before(from) || t.After(to) {
			continue
		}
		for _, m := range stallMarks {
			if strings.Contains(msg, m) {
				found = append(found, t.UTC().Format(time.RFC3339)+" "+msg)
				break
			}
		}
	}
	return found
}
