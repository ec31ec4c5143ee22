package testkit

import "strings"

// GrepLines keeps the lines of s that contain substr, so a failure shows
// the log lines it is about and not the whole log.
func GrepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
