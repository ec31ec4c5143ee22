package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestVerdict: the verdict follows from the two results alone; nothing a
// control failure elsewhere, a skip or a missing run can turn into
// "environment".
func TestVerdict(t *testing.T) {
	failAt := func(loc string) result { return result{status: "failed", location: loc, message: "boom"} }
	for _, tc := range []struct {
		name             string
		control, socklb  result
		bad, environment bool
	}{
		{"both pass", result{status: "passed"}, result{status: "passed"}, false, false},
		{"same place", failAt("test/e2e/network/service.go:10"), failAt("test/e2e/network/service.go:10"), false, true},
		{"elsewhere", failAt("test/e2e/network/service.go:10"), failAt("test/e2e/network/service.go:99"), true, false},
		{"no location", failAt(""), failAt(""), true, false},
		{"control passed", result{status: "passed"}, failAt("x.go:1"), true, false},
		{"control skipped", result{status: "skipped", message: "Only supported for providers [gce]"}, failAt("x.go:1"), true, false},
		{"control not run", result{}, failAt("x.go:1"), true, false},
		{"not run under socklb", result{status: "passed"}, result{}, true, false},
		{"skipped only under socklb", result{status: "passed"}, result{status: "skipped", message: "whatever"}, true, false},
		{"node skip", result{status: "skipped", message: "The test requires at least two ready nodes on local, but found 1"},
			result{status: "skipped", message: "The test requires at least two ready nodes on local, but found 1"}, true, false},
		{"provider skip", result{status: "skipped", message: "Only supported for providers [gce gke] (not local)"},
			result{status: "skipped", message: "Only supported for providers [gce gke] (not local)"}, false, false},
		{"control only", failAt("x.go:1"), result{status: "passed"}, false, false},
	} {
		v, bad := verdict(tc.control, tc.socklb)
		if bad != tc.bad {
			t.Errorf("%s: flagged %v (%q), want %v", tc.name, bad, v, tc.bad)
		}
		if env := len(v) >= 11 && v[:11] == "environment"; env != tc.environment {
			t.Errorf("%s: verdict %q: environment %v, want %v", tc.name, v, env, tc.environment)
		}
	}
}

func TestLocation(t *testing.T) {
	body := "[FAILED] service is not reachable\nIn [It] at: k8s.io/kubernetes@v1.37.2/test/e2e/network/service.go:1234 @ 12/01/26 23:01:02.345\n"
	if got := location(body); got != "test/e2e/network/service.go:1234" {
		t.Errorf("location %q", got)
	}
}

// TestReadGzippedJUnit: promote.sh commits the JUnit reports gzipped; the
// report reads them to the same results as the plain XML.
func TestReadGzippedJUnit(t *testing.T) {
	const junit = `<testsuites><testsuite>` +
		`<testcase name="[It] a passes" time="1.5"></testcase>` +
		`<testcase name="[It] b fails" time="2"><failure message="boom">at test/e2e/network/service.go:42</failure></testcase>` +
		`</testsuite></testsuites>`
	plain, zipped := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "junit_01.xml"), []byte(junit), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(junit))
	zw.Close()
	if err := os.WriteFile(filepath.Join(zipped, "junit_01.xml.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := read(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := read(zipped)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.results) != 2 || !reflect.DeepEqual(a.results, b.results) {
		t.Errorf("plain %v, gzipped %v: want the same 2 results", a.results, b.results)
	}
}
