package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// defaultDebianMirror is used when the machine's apt names no mirror for
// bookworm (a machine that is not Debian 12).
const defaultDebianMirror = "http://deb.debian.org/debian"

// debianMirror returns where the machine's apt takes Debian bookworm from,
// read under root (/ on a real run): the deb822 files in
// etc/apt/sources.list.d first, then etc/apt/sources.list. debootstrap
// then uses the mirror (and whatever proxy or local cache stands behind
// it) that the machine's own packages come from, not a hard-coded one.
func debianMirror(root string) string {
	files, _ := filepath.Glob(filepath.Join(root, "etc/apt/sources.list.d/*.sources"))
	slices.Sort(files)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if uri := mirrorFromDeb822(string(b)); uri != "" {
				return uri
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/apt/sources.list")); err == nil {
		if uri := mirrorFromList(string(b)); uri != "" {
			return uri
		}
	}
	return defaultDebianMirror
}

// mirrorFromDeb822 returns the first URI of an enabled "deb" stanza whose
// Suites hold bookworm itself (not bookworm-updates or -security).
func mirrorFromDeb822(text string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if strings.EqualFold(fields["enabled"], "no") ||
			!slices.Contains(strings.Fields(fields["types"]), "deb") ||
			!slices.Contains(strings.Fields(fields["suites"]), "bookworm") {
			continue
		}
		if uris := strings.Fields(fields["uris"]); len(uris) > 0 {
			return uris[0]
		}
	}
	return ""
}

// mirrorFromList returns the URI of the first one-line "deb" entry for
// bookworm: deb [options] URI suite components.
func mirrorFromList(text string) string {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && f[1] == "bookworm" {
			return f[0]
		}
	}
	return ""
}
