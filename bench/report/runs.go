package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// rawFile is what socklb-bench writes in each run's directory.
const rawFile = "results.json"

// namedRun is one run directory and what it holds.
type namedRun struct {
	name, dir string
	res       Results
}

func (r namedRun) date() string   { s, _ := r.res.Machine["date"].(string); return s }
func (r namedRun) commit() string { s, _ := r.res.Machine["git_commit"].(string); return s }

// findRuns reads every <results>/<name>/results.json, newest first (by the
// date the harness recorded, then by name). Directories without a raw
// file (hookcost's) are not runs.
func findRuns(results string) ([]namedRun, error) {
	ents, err := os.ReadDir(results)
	if err != nil {
		return nil, err
	}
	var runs []namedRun
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(results, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, rawFile))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r := namedRun{name: e.Name(), dir: dir}
		if err := json.Unmarshal(b, &r.res); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, rawFile), err)
		}
		if len(r.res.Runs) == 0 && len(r.res.External) == 0 && len(r.res.Capacity) == 0 {
			return nil, fmt.Errorf("%s: no runs: remove the directory or rerun `make bench BENCH_NAME=%s`", filepath.Join(dir, rawFile), e.Name())
		}
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b namedRun) int {
		if c := strings.Compare(b.date(), a.date()); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return runs, nil
}
