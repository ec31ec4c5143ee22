package testkit

import (
	"os"
	"testing"
)

// RequireRoot skips t unless it runs as root. why names what the test does
// that needs root, so a skipped run says what it did not cover.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s (run as root, as CI does)", why)
	}
}
