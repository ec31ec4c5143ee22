package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// agentLatencyMetric is the agent's own part of the programming latency:
// from a change's informer event to the maps holding it, per changed
// Service (pkg/agent/metrics.go). The API server is not in it.
const agentLatencyMetric = "socklb_event_to_programmed_duration_seconds"

// bucket is one cumulative histogram bucket: count observations <= le.
type bucket struct {
	le    float64
	count float64
}

// histogram reads the cumulative buckets of the histogram name from a
// Prometheus text body, sorted by le (+Inf last).
func histogram(body, name string) ([]bucket, error) {
	var out []bucket
	prefix := name + `_bucket{le="`
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("%s: unreadable bucket line %q", name, line)
		}
		l, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bucket bound %q: %w", name, le, err)
		}
		c, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bucket count %q: %w", name, val, err)
		}
		out = append(out, bucket{l, c})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s histogram in the scrape", name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out, nil
}

// since is the observations of after that came after before (the same
// histogram scraped twice).
func since(after, before []bucket) ([]bucket, error) {
	if len(after) != len(before) {
		return nil, fmt.Errorf("the histogram's buckets changed between scrapes (%d, then %d)", len(before), len(after))
	}
	out := make([]bucket, len(after))
	for i := range after {
		if after[i].le != before[i].le {
			return nil, fmt.Errorf("bucket %d's bound changed between scrapes (%g, then %g)", i, before[i].le, after[i].le)
		}
		out[i] = bucket{after[i].le, after[i].count - before[i].count}
	}
	return out, nil
}

// quantile estimates the q-quantile (0..1) of cumulative buckets as
// Prometheus's histogram_quantile does: linear within the bucket that
// holds the rank, the lower bound of the first bucket taken as 0. A rank
// in the +Inf bucket returns the highest finite bound; no observations
// give NaN.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	lowerLe, lowerCount := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lowerLe
			}
			if b.count == lowerCount {
				return b.le
			}
			return lowerLe + (b.le-lowerLe)*(rank-lowerCount)/(b.count-lowerCount)
		}
		lowerLe, lowerCount = b.le, b.count
	}
	return lowerLe
}

// scraper GETs the agent's /metrics every interval, as a Prometheus
// would, while the changes run: a scrape must never hold up a sync.
type scraper struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	n    int
	max  time.Duration
	errs int
}

func startScraper(addr string, interval time.Duration) *scraper {
	s := &scraper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			start := time.Now()
			_, err := testkit.Scrape(addr)
			took := time.Since(start)
			s.mu.Lock()
			if err != nil {
				s.errs++
			} else {
				s.n++
				s.max = max(s.max, took)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// finish stops the scrapes and returns how many succeeded, failed, and
// the longest one.
func (s *scraper) finish() (n, errs int, longest time.Duration) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.errs, s.max
}

// agentLatency reads the agent's histogram before and after a stretch of
// changes, scraping every second in between.
type agentLatency struct {
	addr   string
	before []bucket
	scr    *scraper
}

func startAgentLatency(addr string) (*agentLatency, error) {
	body, err := testkit.Scrape(addr)
	if err != nil {
		return nil, err
	}
	b, err := histogram(body, agentLatencyMetric)
	if err != nil {
		return nil, err
	}
	return &agentLatency{addr: addr, before: b, scr: startScraper(addr, time.Second)}, nil
}

// abort stops the scrapes of a run that failed before finish.
func (a *agentLatency) abort() {
	if a.scr != nil {
		a.scr.finish()
		a.scr = nil
	}
}

// finish stops the scrapes and writes the quantiles of the observations
// made since the start into r.
func (a *agentLatency) finish(r *Run) error {
	n, errs, longest := a.scr.finish()
	a.scr = nil
	body, err := testkit.Scrape(a.addr)
	if err != nil {
		return err
	}
	after, err := histogram(body, agentLatencyMetric)
	if err != nil {
		return err
	}
	d, err := since(after, a.before)
	if err != nil {
		return err
	}
	changes := int(d[len(d)-1].count)
	r.AgentLatencyChanges, r.Scrapes = &changes, &n
	r.ScrapeMaxMs = fptr(float64(longest.Microseconds()) / 1000)
	if changes > 0 {
		r.AgentLatencyP50ms, r.AgentLatencyP99ms = fptr(quantile(0.5, d)*1e3), fptr(quantile(0.99, d)*1e3)
		logf("socklb's own part (event received -> maps written) over %d changed Services: p50 %.2fms p99 %.2fms; %d scrapes of /metrics meanwhile (%d failed), the longest %.1fms",
			changes, *r.AgentLatencyP50ms, *r.AgentLatencyP99ms, n, errs, *r.ScrapeMaxMs)
	}
	if errs > 0 {
		return fmt.Errorf("%d of %d scrapes of /metrics failed during the changes", errs, errs+n)
	}
	return nil
}
