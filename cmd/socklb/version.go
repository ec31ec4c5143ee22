package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and revision are set at build time with -ldflags "-X
// main.version=... -X main.revision=COMMIT". The image build (`make
// image`, deploy/Dockerfile) compiles with -buildvcs=false, or without
// .git, so Go records no commit there: the revision must come this way.
var (
	version  = "dev"
	revision = ""
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print socklb's version and commit",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			rev := ""
			if r := buildRevision(); r != "" {
				rev = " (" + r + ")"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "socklb %s%s\n", version, rev)
		},
	}
}

// buildRevision is the commit the binary was built from: -X main.revision,
// else what Go recorded (a `go build` in a checkout), else "".
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	return revisionOf(revision, bi, ok)
}

func revisionOf(ldflag string, bi *debug.BuildInfo, ok bool) string {
	if ldflag != "" {
		return ldflag
	}
	if ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
