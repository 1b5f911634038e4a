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

// versionLine is what --version prints: the version, the commit and the Go
// version the binary was built with, from the build information.
func versionLine() string {
	v, commit, dirty, goVersion := toolVersion(), "unknown", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
	}
	return fmt.Sprintf("%s, commit %s%s, %s", v, commit, dirty, goVersion)
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
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "print one machine-readable JSON document (or one JSON object per line where findings stream)")
	root.PersistentFlags().BoolVarP(&g.Quiet, "quiet", "q", false, "no progress bars")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef(fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	root.SetVersionTemplate("rebucket {{.Version}}\n")
	for _, f := range commandFactories {
		root.AddCommand(f(g))
	}
	installEngines(root, g)
	addHelpAndCompletion(root)
	return root
}

// isTerminal reports whether w is a terminal, for progress bars.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
