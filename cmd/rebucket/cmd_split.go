package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/rewrite"
)

func init() { registerCommand(newSplitCommand) }

type splitOptions struct {
	outs               []string
	by, fileSize, note string
	parallelism        int
	force, dryRun      bool
}

func newSplitCommand(g *globalOptions) *cobra.Command {
	o := &splitOptions{}
	cmd := &cobra.Command{
		Use:   "split SOURCE --out A --out B --by RULE [flags]",
		Short: "Split a snapshot into two complete snapshots with the same partitioning",
		Long: `split writes the entries of SOURCE that match --by to the first --out and the
rest to the second: two complete snapshots with SOURCE's partitioning, states
table and width, so the key space can be served by two jobs. Every entry lands
in exactly one of them; per-worker state is copied into both.

Rules:
  state=STEP/NAME[,STEP/NAME...]  entries of these keyed states
  key-prefix=HEX                  entries whose key starts with these bytes
  buckets=LO-HI                   entries of buckets LO..HI`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSplit(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.outs, "out", nil, "output directory: give it twice, A (matching) then B (the rest)")
	f.StringVar(&o.by, "by", "", "rule: state=STEP/NAME[,...], key-prefix=HEX or buckets=LO-HI")
	_ = cmd.MarkFlagRequired("out")
	_ = cmd.MarkFlagRequired("by")
	f.IntVar(&o.parallelism, "parallelism", 0, "concurrent tasks (default: the number of CPUs)")
	f.StringVar(&o.fileSize, "file-size", "128MiB", "target data file size")
	f.StringVar(&o.note, "note", "", "note recorded in both lineages")
	f.BoolVar(&o.dryRun, "dry-run", false, "run the checks, write nothing: exit 0 when the split would start, else the refusal's code")
	f.BoolVar(&o.force, "force", false, "replace non-empty outputs once the new snapshots are complete")
	return cmd
}

func runSplit(cmd *cobra.Command, g *globalOptions, o *splitOptions, source string) error {
	if len(o.outs) != 2 {
		return usagef(fmt.Errorf("--out must be given exactly twice (A, then B), got %d", len(o.outs)))
	}
	rule, err := rewrite.ParseSplitRule(o.by)
	if err != nil {
		return usagef(err)
	}
	fs, err := units.ParseBytes(o.fileSize)
	if err != nil || fs <= 0 {
		return usagef(fmt.Errorf("--file-size %q: want a size such as 128MiB", o.fileSize))
	}
	if err := checkFileSizeFlag(fs, source); err != nil {
		return err
	}
	if o.parallelism < 0 {
		return usagef(fmt.Errorf("--parallelism %d: want at least 1", o.parallelism))
	}
	sum, err := rewrite.Split(cmd.Context(), rewrite.SplitOptions{
		Source: source, OutA: o.outs[0], OutB: o.outs[1], Rule: rule, Parallelism: o.parallelism,
		FileSize: fs, Force: o.force, Note: o.note, Tool: toolName(), Progress: relabel(newProgress(cmd, g), "split: read and write"), DryRun: o.dryRun,
	})
	if o.dryRun {
		return reportDryRun(cmd, g, "split", nil, err)
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), sum)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "split %s by %s in %s (%s):\n  A %s: %s entries, %s\n  B %s: %s entries, %s\n",
		source, sum.Rule, units.Duration(sum.Elapsed), units.Rate(sum.SourceBytes, sum.Elapsed),
		sum.OutA, units.Count(sum.EntriesA), units.Bytes(sum.BytesA),
		sum.OutB, units.Count(sum.EntriesB), units.Bytes(sum.BytesB))
	return nil
}
