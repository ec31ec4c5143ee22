// Command report writes CONFORMANCE.md from the JUnit reports of two runs
// of the upstream suite on the real node (tests/node): the control, with
// kube-proxy v1.37.2, and socklb. Each test gets its result under both;
// each socklb failure or skip its reason. It exits 1 when a test fails
// under socklb and passes under kube-proxy: that is a socklb bug.
//
//	report -control DIR -socklb DIR -out CONFORMANCE.md
package main

import (
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// deliberate are the upstream tests socklb fails on purpose, each with the
// README row that says why. They are reported, not counted as bugs.
var deliberate = []struct{ test, reason string }{
	{"should be possible to connect to a service via ExternalIP when the external IP is not assigned to a node",
		"differs on purpose: an externalIP is translated only when it is this node's address or inside --external-ip-cidrs (CVE-2020-8554; README behaviour table, externalIPs row)"},
}

func deliberateReason(name string) string {
	for _, d := range deliberate {
		if strings.Contains(name, d.test) {
			return d.reason
		}
	}
	return ""
}

type testcase struct {
	Name    string  `xml:"name,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

type result struct {
	status string // passed, failed, skipped
	reason string
	secs   float64
}

type run struct {
	results map[string]result
	meta    string
}

func main() {
	control := flag.String("control", "", "JUnit report directory of the kube-proxy run")
	socklb := flag.String("socklb", "", "JUnit report directory of the socklb run")
	out := flag.String("out", "CONFORMANCE.md", "the Markdown file to write")
	flag.Parse()
	c, err := read(*control)
	if err != nil {
		fatal(err)
	}
	s, err := read(*socklb)
	if err != nil {
		fatal(err)
	}
	md, regressions := render(c, s, *control, *socklb)
	if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		fatal(err)
	}
	fmt.Printf("wrote %s\n", *out)
	if regressions > 0 {
		fmt.Fprintf(os.Stderr, "report: %d test(s) fail under socklb and pass under kube-proxy\n", regressions)
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(2)
}

// read parses every junit*.xml of dir. Specs the focus filtered out are
// dropped: they did not run under either proxy.
func read(dir string) (*run, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no junit*.xml in %q", dir)
	}
	r := &run{results: map[string]result{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Suites []struct {
				Cases []testcase `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range doc.Suites {
			for _, tc := range s.Cases {
				if strings.HasPrefix(tc.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(tc.Name, "[SynchronizedAfterSuite]") ||
					strings.HasPrefix(tc.Name, "[ReportBeforeSuite]") || strings.HasPrefix(tc.Name, "[ReportAfterSuite]") {
					continue
				}
				res := result{status: "passed", secs: tc.Time}
				switch {
				case tc.Failure != nil:
					res.status, res.reason = "failed", firstLine(tc.Failure.Message, tc.Failure.Body)
				case tc.Error != nil:
					res.status, res.reason = "failed", firstLine(tc.Error.Message, "")
				case tc.Skipped != nil:
					if filtered(tc.Skipped.Message) {
						continue
					}
					res.status, res.reason = "skipped", firstLine(tc.Skipped.Message, "")
				}
				r.results[tc.Name] = res
			}
		}
	}
	return r, nil
}

// filtered: ginkgo lists the specs its focus and skip left out as skipped
// with this bare message; they are not part of the run. A spec the suite
// skipped itself says why ("skipped - Requires at least 2 nodes") and is
// reported with that reason.
func filtered(msg string) bool {
	return msg == "" || msg == "skipped"
}

func firstLine(msg, body string) string {
	s := strings.TrimSpace(msg)
	if s == "" {
		s = strings.TrimSpace(body)
	}
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "[FAILED]"))
		if l == "" {
			continue
		}
		if len(l) > 300 {
			l = l[:300] + "..."
		}
		return strings.ReplaceAll(l, "|", "\\|")
	}
	return ""
}

func render(c, s *run, cdir, sdir string) (string, int) {
	names := map[string]bool{}
	for n := range c.results {
		names[n] = true
	}
	for n := range s.results {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	count := func(r *run) (p, f, sk int) {
		for _, n := range sorted {
			switch r.results[n].status {
			case "passed":
				p++
			case "failed":
				f++
			case "skipped":
				sk++
			}
		}
		return
	}
	var b strings.Builder
	b.WriteString("# Conformance on a real node\n\n")
	b.WriteString("Generated by `make conformance` (tests/node/report) from the JUnit reports of\n")
	fmt.Fprintf(&b, "two runs of the upstream suite (e2e.test v1.37.2) on one real node of this\n")
	fmt.Fprintf(&b, "machine: `%s` (kube-proxy v1.37.2, iptables mode: the control) and `%s`\n", cdir, sdir)
	b.WriteString("(socklb from deploy/, no kube-proxy). Do not edit by hand.\n\n")
	b.WriteString("A test that fails under both proxies is the environment (the reason is the\n")
	b.WriteString("suite's own message); one that fails only under socklb is a socklb bug.\n\n")
	cp, cf, cs := count(c)
	sp, sf, ss := count(s)
	b.WriteString("| proxy | passed | failed | skipped |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| kube-proxy | %d | %d | %d |\n| socklb | %d | %d | %d |\n\n", cp, cf, cs, sp, sf, ss)
	regressions := 0
	b.WriteString("| test | kube-proxy | socklb | reason (socklb failure or skip) |\n|---|---|---|---|\n")
	for _, n := range sorted {
		cr, sr := c.results[n], s.results[n]
		reason := ""
		if sr.status == "failed" || sr.status == "skipped" {
			reason = sr.reason
			if sr.status == "failed" && cr.status == "failed" {
				reason = "fails under kube-proxy too: " + reason
			}
		}
		if sr.status == "failed" && cr.status == "passed" {
			if why := deliberateReason(n); why != "" {
				reason = why + " (" + sr.reason + ")"
			} else {
				regressions++
				reason = "**socklb only**: " + reason
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.ReplaceAll(n, "|", "\\|"), orNone(cr.status), orNone(sr.status), reason)
	}
	return b.String(), regressions
}

func orNone(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}
