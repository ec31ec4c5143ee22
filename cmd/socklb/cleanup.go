package main

import (
	"flag"
	"fmt"

	"github.com/socklb/socklb/pkg/datapath"
)

func runCleanup(args []string) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	bpffs := fs.String("bpffs-path", defaultBPFFS, "directory holding socklb's pins")
	force := fs.Bool("force", false, "remove the pins even while an agent holds them (its hooks are detached under it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := datapath.Cleanup(*bpffs, *force); err != nil {
		return err
	}
	fmt.Printf("removed socklb's links and maps under %s; its hooks are detached\n", *bpffs)
	return nil
}
