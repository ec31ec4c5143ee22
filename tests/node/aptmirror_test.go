package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDebianMirror: the root filesystem comes from the mirror the
// machine's apt uses for bookworm, deb822 files before sources.list, and
// deb.debian.org only when apt names none.
func TestDebianMirror(t *testing.T) {
	cases := []struct {
		name    string
		sources map[string]string // path under the root -> content
		want    string
	}{
		{"nothing configured", nil, defaultDebianMirror},
		{"deb822, the security and updates stanzas skipped", map[string]string{
			"etc/apt/sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n" +
				"Types: deb deb-src\n# a comment\nURIs: http://mirror.example/debian http://other.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n",
		}, "http://mirror.example/debian"},
		{"deb822, a disabled stanza and a deb-src one skipped", map[string]string{
			"etc/apt/sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n",
			"etc/apt/sources.list.d/b.sources": "Types: deb\nURIs: https://on.example/debian\nSuites: bookworm\n",
		}, "https://on.example/debian"},
		{"sources.list with options", map[string]string{
			"etc/apt/sources.list": "# deb http://commented.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main\n",
		}, "http://list.example/debian"},
		{"another release only", map[string]string{
			"etc/apt/sources.list": "deb http://old.example/debian bullseye main\n",
		}, defaultDebianMirror},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for p, body := range c.sources {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := debianMirror(root); got != c.want {
				t.Errorf("debianMirror = %q, want %q", got, c.want)
			}
		})
	}
}
