package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFatalErrorIsJSON: under --logging-format=json the error that stops
// the agent is one JSON record of its log, also when it is found before
// the logging flags are applied (a flag's value, the config file); in text
// it stays main's one "socklb agent: " line. The start path's errors are
// checked in both formats by TestChecksBeforeAnythingIsCreated.
func TestFatalErrorIsJSON(t *testing.T) {
	dup := filepath.Join(t.TempDir(), "socklb.yaml")
	if err := os.WriteFile(dup, []byte("apiVersion: socklb.io/v1alpha1\nkind: SocklbConfiguration\nmaxBackends: 1\nmaxBackends: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		format string
		args   []string
		want   []string
	}{
		{"flag value", "json", []string{"agent", "--logging-format=json", "--max-services", "0"}, []string{"--max-services=0: must be between 1 and 2^31"}},
		{"flag value, format from the file", "json", []string{"agent", "--config", writeConfig(t, "logging:\n  format: json\nmaxServices: 0\n")},
			[]string{"--max-services=0"}},
		{"config file", "json", []string{"agent", "--logging-format=json", "--config", dup}, []string{`"maxBackends" is given twice`}},
		{"flag value in text", "text", []string{"agent", "--max-services", "0"}, []string{"--max-services=0"}},
		// The file that cannot be read sets no format.
		{"config file asking for JSON in text", "text", []string{"agent", "--config", writeConfig(t, "logging:\n  format: json\nlogging: {}\n")},
			[]string{`"logging" is given twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			checkFatalLine(t, tc.format, stderr, tc.want)
		})
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "socklb.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: socklb.io/v1alpha1\nkind: SocklbConfiguration\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkFatalLine checks that stderr is one line: main's "socklb agent: "
// line in text, one JSON record of the agent's log in JSON, saying each
// of want.
func checkFatalLine(t *testing.T, format, stderr string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines on stderr, want 1:\n%s", len(lines), stderr)
	}
	msg := lines[0]
	if format == "json" {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatalf("--logging-format=json, yet the fatal error is not JSON: %q: %v", lines[0], err)
		}
		if rec["msg"] != "socklb agent failed" {
			t.Errorf("JSON record %v: msg %q, want %q", rec, rec["msg"], "socklb agent failed")
		}
		msg, _ = rec["err"].(string)
	} else if !strings.HasPrefix(msg, "socklb agent: ") {
		t.Errorf("%q does not start with %q", msg, "socklb agent: ")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error %q lacks %q", msg, w)
		}
	}
}
