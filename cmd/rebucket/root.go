package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X main.version=..."; a
// module build reports its module version.
var version = ""

func toolVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// toolName is recorded in manifests and lineage.
func toolName() string { return "rebucket " + toolVersion() }

// globalOptions are the flags every command shares.
type globalOptions struct {
	JSON  bool
	Quiet bool
}

// commandFactories is filled by each command file's init, so adding a
// command touches only its own file.
var commandFactories []func(*globalOptions) *cobra.Command

func registerCommand(f func(*globalOptions) *cobra.Command) {
	commandFactories = append(commandFactories, f)
}

func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "rebucket",
		Short: "Rewrite the keyed snapshots of streaming jobs into a new bucket count",
		Long: `rebucket reads a stored keyed snapshot as an ordinary dataset, rehashes every
entry into a new bucket layout, writes a snapshot the next start can load, and
proves key-level equality. A job started with N buckets can never run more than
N state-owning workers; rebucket raises N offline.

` + exitCodeTable,
		Version:       toolVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "print one machine-readable JSON document (or one JSON object per line where findings stream)")
	root.PersistentFlags().BoolVarP(&g.Quiet, "quiet", "q", false, "no progress bars")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef(fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	for _, f := range commandFactories {
		root.AddCommand(f(g))
	}
	return root
}

// isTerminal reports whether w is a terminal, for progress bars.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
