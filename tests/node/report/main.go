// Command report writes CONFORMANCE.md from the JUnit reports of two runs
// of the upstream suite on the real nodes (tests/node): the control, with
// kube-proxy v1.37.2, and socklb. Each test gets its result, failure
// message and failure location under both proxies.
//
// The verdict is mechanical and names no test: a socklb failure is the
// environment only when the control failed at the same place (the same
// file:line of the suite); a socklb failure where the control passed,
// skipped, did not run or failed elsewhere is a socklb failure. The report
// exits 1 when there is one, or when a run is incomplete.
//
//	report -control DIR -socklb DIR -out CONFORMANCE.md
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/socklb/socklb/tests/node"
)

type testcase struct {
	Name    string  `xml:"name,attr"`
	Time    float64 `xml:"time,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

type result struct {
	status   string // passed, failed, skipped; "" = not run
	message  string // the first line of the failure or skip
	location string // file:line where the spec failed (ginkgo's "In [It] at:")
	secs     float64
}

type run struct {
	dir     string
	results map[string]result
	meta    string
	pulls   []string // image pull failures in the run's log
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
	md, bad := render(c, s)
	if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		fatal(err)
	}
	fmt.Printf("wrote %s\n", *out)
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "report: %d flagged test(s): failing under socklb where the control passed, skipped, did not run or failed elsewhere; not run or skipped only under socklb; or skipped for the number of nodes\n", bad)
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(2)
}

// read parses every junit*.xml (or junit*.xml.gz, as promote.sh commits
// them) of dir, run.txt and e2e.log. Specs the focus filtered out are
// dropped: they did not run under either proxy.
func read(dir string) (*run, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	gz, _ := filepath.Glob(filepath.Join(dir, "junit*.xml.gz"))
	files = append(files, gz...)
	if len(files) == 0 {
		return nil, fmt.Errorf("no junit*.xml or junit*.xml.gz in %q", dir)
	}
	r := &run{dir: dir, results: map[string]result{}}
	if b, err := os.ReadFile(filepath.Join(dir, "run.txt")); err == nil {
		r.meta = string(b)
	}
	r.pulls = pullFailures(filepath.Join(dir, "e2e.log"))
	for _, f := range files {
		b, err := readMaybeGzip(f)
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
					strings.HasPrefix(tc.Name, "[ReportBeforeSuite]") || strings.HasPrefix(tc.Name, "[ReportAfterSuite]") ||
					strings.HasPrefix(tc.Name, "[BeforeSuite]") || strings.HasPrefix(tc.Name, "[AfterSuite]") {
					if tc.Failure == nil && tc.Error == nil {
						continue
					}
				}
				res := result{status: "passed", secs: tc.Time}
				switch {
				case tc.Failure != nil:
					res.status, res.message, res.location = "failed", firstLine(tc.Failure.Message, tc.Failure.Body), location(tc.Failure.Body)
				case tc.Error != nil:
					res.status, res.message, res.location = "failed", firstLine(tc.Error.Message, tc.Error.Body), location(tc.Error.Body)
				case tc.Skipped != nil:
					if filtered(tc.Skipped.Message) {
						continue
					}
					res.status, res.message = "skipped", firstLine(tc.Skipped.Message, "")
				}
				r.results[tc.Name] = res
			}
		}
	}
	return r, nil
}

// pullFailures are the lines of the suite's log that show a pod waiting on
// an image the harness did not import.
func pullFailures(log string) []string {
	b, err := os.ReadFile(log)
	if err != nil {
		return nil
	}
	re := regexp.MustCompile(`(ErrImageNeverPull|ImagePullBackOff|ErrImagePull)[^\n]{0,200}`)
	seen := map[string]bool{}
	var out []string
	for _, m := range re.FindAllString(string(b), -1) {
		img := regexp.MustCompile(`image "?([a-z0-9.\-/]+:[A-Za-z0-9.\-_]+)`).FindStringSubmatch(m)
		key := m
		if img != nil {
			key = img[1]
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// filtered: ginkgo lists the specs its focus and skip left out as skipped
// with this bare message; they are not part of the run. A spec the suite
// skipped itself says why and is reported with that reason.
func filtered(msg string) bool {
	return msg == "" || msg == "skipped"
}

var locRe = regexp.MustCompile(`In \[[A-Za-z]+\] at: (\S+?:\d+)`)

// location is where ginkgo says the spec failed: the suite's file:line,
// trimmed to the path inside k8s.io/kubernetes.
func location(body string) string {
	m := locRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	l := m[1]
	if i := strings.Index(l, "test/e2e/"); i >= 0 {
		l = l[i:]
	}
	return l
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

// verdict compares one test's two results.
func verdict(c, s result) (string, bool) {
	switch {
	case s.status == "failed" && c.status == "failed" && s.location != "" && s.location == c.location:
		return "environment: the control failed at the same place", false
	case s.status == "failed" && c.status == "failed":
		return fmt.Sprintf("**socklb failure**: the control failed elsewhere (%s vs %s)", orDash(c.location), orDash(s.location)), true
	case s.status == "failed":
		return "**socklb failure**: the control " + orNone(c.status), true
	case s.status == "" && c.status != "":
		return "**not run under socklb**", true
	case s.status == "skipped" && c.status == "passed":
		return "**socklb failure**: skipped under socklb, passed under the control", true
	case c.status == "failed":
		return "control failure (socklb " + orNone(s.status) + ")", false
	case s.status == "skipped" || c.status == "skipped":
		if nodeSkip(s.message) || nodeSkip(c.message) {
			return "**skipped for the number of nodes**", true
		}
		return "skipped by the suite", false
	}
	return "", false
}

// nodeSkip: the suite skipped because the cluster is too small.
func nodeSkip(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "nodes") && (strings.Contains(m, "at least") || strings.Contains(m, "requires") || strings.Contains(m, "need"))
}

func render(c, s *run) (string, int) {
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
	count := func(r *run) (p, f, sk, nr int) {
		for _, n := range sorted {
			switch r.results[n].status {
			case "passed":
				p++
			case "failed":
				f++
			case "skipped":
				sk++
			default:
				nr++
			}
		}
		return
	}
	var b strings.Builder
	b.WriteString("# Conformance on real nodes\n\n")
	b.WriteString("Generated by `make conformance` (tests/node/report) from the JUnit reports of\n")
	b.WriteString("two runs of the upstream suite (e2e.test v1.37.2) on the same cluster of real\n")
	fmt.Fprintf(&b, "nodes on this machine: `%s` (kube-proxy v1.37.2, iptables mode: the control) and\n", c.dir)
	fmt.Fprintf(&b, "`%s` (socklb from deploy/, no kube-proxy). Do not edit by hand.\n\n", s.dir)
	b.WriteString("The verdict names no test. A socklb failure is the environment only when the\n")
	b.WriteString("control failed at the same place (the same file:line of the suite); a socklb\n")
	b.WriteString("failure where the control passed, skipped, did not run or failed elsewhere is a\n")
	b.WriteString("**socklb failure**, and so is a test skipped for the number of nodes.\n\n")
	b.WriteString("## Runs\n\n")
	for _, r := range []*run{c, s} {
		fmt.Fprintf(&b, "`%s`:\n\n```\n%s```\n\n", r.dir, r.meta)
	}
	cp, cf, cs, cn := count(c)
	sp, sf, ss, sn := count(s)
	b.WriteString("| proxy | passed | failed | skipped | not run |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| kube-proxy | %d | %d | %d | %d |\n| socklb | %d | %d | %d | %d |\n\n", cp, cf, cs, cn, sp, sf, ss, sn)

	bad := 0
	var flagged, env, control []string
	var rows strings.Builder
	rows.WriteString("| test | kube-proxy | socklb | verdict |\n|---|---|---|---|\n")
	for _, n := range sorted {
		cr, sr := c.results[n], s.results[n]
		v, isBad := verdict(cr, sr)
		if isBad {
			bad++
			flagged = append(flagged, n)
		} else if strings.HasPrefix(v, "environment") {
			env = append(env, n)
		} else if strings.HasPrefix(v, "control failure") {
			control = append(control, n)
		}
		fmt.Fprintf(&rows, "| %s | %s | %s | %s |\n", esc(n), cell(cr), cell(sr), v)
	}
	fmt.Fprintf(&b, "**socklb failures: %d.** Environment (both failed at the same place): %d. Control-only failures: %d.\n\n", bad, len(env), len(control))
	if len(flagged) > 0 {
		b.WriteString("## socklb failures\n\n")
		detail(&b, flagged, c, s)
	}
	if len(env)+len(control) > 0 {
		b.WriteString("## Failures of the control\n\nEach is a failure under kube-proxy: a real cluster's, or the harness's to fix.\n\n")
		detail(&b, append(env, control...), c, s)
	}
	for _, r := range []*run{c, s} {
		if len(r.pulls) > 0 {
			fmt.Fprintf(&b, "## Images pods waited on in `%s` (a harness bug: every image must be imported)\n\n", r.dir)
			for _, p := range r.pulls {
				fmt.Fprintf(&b, "- `%s`\n", p)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("## Left out, and the rule that excludes it\n\n")
	b.WriteString("The focus is every [sig-network] test that needs no cloud provider and no machine\n")
	b.WriteString("outside this one:\n\n```\n" + node.DefaultFocus + "\n```\n\nThese skip patterns apply (each run's own skip is in its run.txt above), each for its reason:\n\n")
	b.WriteString("| pattern | why | applies |\n|---|---|---|\n")
	for _, r := range node.ExcludeRules {
		applies := "always"
		if r.Below > 0 {
			applies = fmt.Sprintf("with fewer than %d nodes", r.Below)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", esc(r.Pattern), r.Reason, applies)
	}
	b.WriteString("\nsig-network suites outside the focus:\n\n| suite | why |\n|---|---|\n")
	for _, r := range node.OutsideFocus {
		fmt.Fprintf(&b, "| `%s` | %s |\n", esc(r.Pattern), r.Reason)
	}
	b.WriteString("\n## Every test\n\n")
	b.WriteString(rows.String())
	return b.String(), bad
}

func detail(b *strings.Builder, names []string, c, s *run) {
	for _, n := range names {
		cr, sr := c.results[n], s.results[n]
		fmt.Fprintf(b, "- %s\n", esc(n))
		for _, x := range []struct {
			proxy string
			r     result
		}{{"kube-proxy", cr}, {"socklb", sr}} {
			fmt.Fprintf(b, "  - %s: %s", x.proxy, orNone(x.r.status))
			if x.r.location != "" {
				fmt.Fprintf(b, " at `%s`", x.r.location)
			}
			if x.r.message != "" {
				fmt.Fprintf(b, ": %s", x.r.message)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
}

func cell(r result) string {
	s := orNone(r.status)
	if r.status == "failed" || r.status == "skipped" {
		if r.location != "" {
			s += " at `" + r.location + "`"
		}
		if r.message != "" {
			m := r.message
			if len(m) > 160 {
				m = m[:160] + "..."
			}
			s += ": " + m
		}
	}
	return s
}

func esc(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func orNone(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "no location"
	}
	return s
}

// readMaybeGzip reads f, decompressing it when its name ends in .gz.
func readMaybeGzip(f string) ([]byte, error) {
	b, err := os.ReadFile(f)
	if err != nil || !strings.HasSuffix(f, ".gz") {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	defer zr.Close()
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return out, nil
}
