package main

import (
	"fmt"

	"encoding/json"
	"io"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/progress"
)

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v as one JSON object on one line (streamed findings).
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// exactArgs is cobra.ExactArgs with our usage error class.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usagef(err)
		}
		return nil
	}
}

// testProgress, when set, receives every command's progress (tests).
var testProgress progress.Reporter

// newProgress returns a progress bar on stderr when it is a terminal and
// progress is wanted, else a no-op.
func newProgress(cmd *cobra.Command, g *globalOptions) progress.Reporter {
	if testProgress != nil {
		return testProgress
	}
	w := cmd.ErrOrStderr()
	if g.Quiet || !isTerminal(w) {
		return progress.Nop{}
	}
	return &barReporter{w: w}
}

// memoryFlagHelp is the help of every --memory flag.
const memoryFlagHelp = "memory budget, e.g. 4GiB (default: a quarter of physical memory)"

// parseMemory reads a --memory flag; empty means plan.DefaultMemory().
func parseMemory(s string) (int64, error) {
	if s == "" {
		return plan.DefaultMemory(), nil
	}
	n, err := units.ParseBytes(s)
	if err != nil || n <= 0 {
		return 0, usagef(fmt.Errorf("--memory %q: want a size such as 4GiB", s))
	}
	return n, nil
}

// reportTempDirs tells what publication found beside the target: the
// temporary directories of dead runs it removed, and those it left alone
// because no marker shows a dead run (an interrupted --force can leave the
// old target there): only a person may remove those.
func reportTempDirs(w io.Writer, removed, leftover []string) {
	for _, p := range removed {
		fmt.Fprintf(w, "removed the temporary directory of a dead run: %s\n", p)
	}
	for _, p := range leftover {
		fmt.Fprintf(w, "left alone: %s is a temporary directory of this target that no dead run's marker claims (possibly the old target of an interrupted --force); check it and remove it by hand\n", p)
	}
}
