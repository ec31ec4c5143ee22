package testkit

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Get fetches http://addr/path: the agent's /healthz, /livez and /metrics
// are only ever served on 127.0.0.1 in the tests.
func Get(addr, path string) (code int, body string, err error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Scrape returns the agent's /metrics in the Prometheus text format.
func Scrape(addr string) (string, error) {
	code, body, err := Get(addr, "/metrics")
	if err != nil {
		return "", fmt.Errorf("GET http://%s/metrics: %w", addr, err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET http://%s/metrics: status %d", addr, code)
	}
	return body, nil
}

// Sample returns the value of the sample line named name (with its labels,
// if any: `socklb_kernel_feature_enabled{feature="set_retval"}`) in a
// scraped body, and whether there is one.
func Sample(body, name string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// Metric scrapes addr and returns one sample: what the benchmark and the
// e2e tests poll while the agent syncs.
func Metric(addr, name string) (float64, error) {
	body, err := Scrape(addr)
	if err != nil {
		return 0, err
	}
	v, ok := Sample(body, name)
	if !ok {
		return 0, fmt.Errorf("no %s in http://%s/metrics", name, addr)
	}
	return v, nil
}
