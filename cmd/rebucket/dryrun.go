package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// dryRunReport is the --json document of a --dry-run.
type dryRunReport struct {
	DryRun bool `json:"dry_run"`
	// WouldStart tells whether the real run would start; Refusal is why
	// not (the exit code is the real run's).
	WouldStart bool   `json:"would_start"`
	Refusal    string `json:"refusal,omitempty"`
	Plan       any    `json:"plan,omitempty"`
}

// reportDryRun ends a --dry-run of command: exit 0 when every check passed
// and the real run would start, else the code the real run would exit
// with. Nothing was written either way.
func reportDryRun(cmd *cobra.Command, g *globalOptions, command string, planned any, err error) error {
	out := cmd.OutOrStdout()
	if g.JSON {
		rep := dryRunReport{DryRun: true, WouldStart: err == nil, Plan: planned}
		if err != nil {
			rep.Refusal = err.Error()
		}
		if werr := writeJSON(out, rep); werr != nil {
			return werr
		}
		return err
	}
	if err != nil {
		fmt.Fprintf(out, "dry run: the %s would not start (nothing was written):\n", command)
		return err
	}
	fmt.Fprintf(out, "dry run: every check passed and the %s would start; nothing was written (run it again without --dry-run)\n", command)
	return nil
}
