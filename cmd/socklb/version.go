package main

import (
	"fmt"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func runVersion([]string) error {
	rev := ""
	if r := vcsRevision(); r != "" {
		rev = " (" + r + ")"
	}
	fmt.Printf("socklb %s%s\n", version, rev)
	return nil
}

// vcsRevision is the commit the binary was built from, if Go recorded it.
func vcsRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
