package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/rewrite"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

func init() { registerCommand(newRewriteCommand) }

type rewriteOptions struct {
	buckets, parallelism      int
	out, mapping, memory, tmp string
	fileSize, note            string
	compression               string
	force, noVerify, dryRun   bool
	dropStates, renameStates  []string
	forWidths                 []string
}

func newRewriteCommand(g *globalOptions) *cobra.Command {
	o := &rewriteOptions{}
	cmd := &cobra.Command{
		Use:   "rewrite SOURCE --buckets M --out TARGET [flags]",
		Short: "Rewrite a snapshot into a new bucket count (and mapping)",
		Long: `rewrite reads every entry of SOURCE, rehashes it into M buckets (under the
target mapping, by default the source's), and writes TARGET as a complete
snapshot, published atomically. Per-worker state, the states table and codec
hints are carried unchanged; a lineage record is appended.

The strategy comes from the plan and is printed first:
  split    same mapping, M a multiple of N: each old bucket is streamed once
  merge    range to range, or mod to mod with N a multiple of M: a streaming
           merge of the few old buckets that feed each new one
  shuffle  anything else: owners sort within --memory, spilling sorted runs
           to --tmp (default: beside TARGET), removed at the end

Data files hold contiguous bucket ranges cut at --file-size, not one file
per bucket: the file count follows the bytes written, not M. Files are also
cut where the workers of the --for-width widths begin (recorded in the
manifest as cut_widths), so a load at those widths ingests every file whole.
New buckets that are ready before their turn wait within --memory, then in
--tmp.

Peak memory stays within --memory plus a fixed overhead of about 96 MiB.
SOURCE is only read. TARGET must not exist or be empty (else --force, which
replaces it only once the new one is complete). Free disk at TARGET and
--tmp is checked against the plan's estimate first. Ctrl-C removes every
temporary and spill file and leaves no TARGET.

Unless --no-verify, the output proves itself before it is published:
fingerprints of SOURCE's entries are taken during the scan, the sealed output
is read back (checksums checked) and must match them bucket by bucket, with
every entry in the bucket its key hashes to, agreeing stats and byte-identical
per-worker state (dropped and renamed states are accounted for). On a mismatch
nothing is published, SOURCE is compared exactly, the differing keys are
listed, and the exit code is 1.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRewrite(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.buckets, "buckets", 0, "target bucket count M (1..65536)")
	f.StringVar(&o.out, "out", "", "TARGET directory (must not exist, or be empty)")
	_ = cmd.MarkFlagRequired("buckets")
	_ = cmd.MarkFlagRequired("out")
	f.StringVar(&o.mapping, "mapping", "", "target mapping: mod or range (default: the source's)")
	f.IntVar(&o.parallelism, "parallelism", 0, "concurrent tasks (default: the number of CPUs)")
	f.StringVar(&o.memory, "memory", "", memoryFlagHelp)
	f.StringVar(&o.tmp, "tmp", "", "directory for spill files (default: TARGET's parent)")
	f.StringVar(&o.fileSize, "file-size", "128MiB", "target data file size")
	f.StringVar(&o.compression, "compression", "snappy", compressionFlagHelp)
	f.StringVar(&o.note, "note", "", "note recorded in the lineage")
	f.BoolVar(&o.force, "force", false, "replace a non-empty TARGET once the new snapshot is complete")
	f.BoolVar(&o.noVerify, "no-verify", false, "skip proving the output against SOURCE")
	f.BoolVar(&o.dryRun, "dry-run", false, "run the checks and print the plan, write nothing: exit 0 when the rewrite would start, else the refusal's code")
	f.StringSliceVar(&o.forWidths, "for-width", nil, "also cut data files where the workers of these widths begin, so a load at them ingests every file whole (repeatable or comma-separated; none: only the width at write; default: the widths that divide M with at least 4 buckets each, up to 64, and the width at write)")
	f.StringArrayVar(&o.dropStates, "drop-state", nil, "leave out state STEP/NAME (repeatable; recorded in the lineage)")
	f.StringArrayVar(&o.renameStates, "rename-state", nil, "rename state STEP/OLD=NEW (repeatable; recorded in the lineage)")
	return cmd
}

// rewriteReport is the --json document.
type rewriteReport struct {
	Rewrite *rewrite.Summary `json:"rewrite"`
	// PeakRSS is the process's peak resident memory (rewrite and
	// self-check), 0 where the system does not say.
	PeakRSS      int64                `json:"peak_rss_bytes"`
	Verification rewrite.Verification `json:"verification"`
}

func runRewrite(cmd *cobra.Command, g *globalOptions, o *rewriteOptions, source string) error {
	opts := rewrite.Options{
		Source: source, Target: o.out, Parallelism: o.parallelism, TmpDir: o.tmp, Force: o.force,
		Note: o.note, Tool: toolName(), DropStates: o.dropStates, RenameStates: o.renameStates,
		Progress: newProgress(cmd, g), NoVerify: o.noVerify, DryRun: o.dryRun, VerifyProgress: relabel(newProgress(cmd, g), "self-check: read the output back"),
	}
	if o.buckets < snapshotfmt.MinBuckets || o.buckets > snapshotfmt.MaxBuckets {
		return usagef(fmt.Errorf("--buckets %d: want %d..%d", o.buckets, snapshotfmt.MinBuckets, snapshotfmt.MaxBuckets))
	}
	opts.To.Buckets = uint32(o.buckets)
	if o.mapping != "" {
		mp, err := snapshotfmt.ParseMapping(o.mapping)
		if err != nil {
			return usagef(err)
		}
		opts.To.Mapping = mp
	}
	if o.parallelism < 0 {
		return usagef(fmt.Errorf("--parallelism %d: want at least 1", o.parallelism))
	}
	var err error
	if opts.Memory, err = parseMemory(o.memory); err != nil {
		return err
	}
	if opts.FileSize, err = units.ParseBytes(o.fileSize); err != nil || opts.FileSize <= 0 {
		return usagef(fmt.Errorf("--file-size %q: want a size such as 128MiB", o.fileSize))
	}
	if err := checkFileSizeFlag(opts.FileSize, source); err != nil {
		return err
	}
	if opts.ForWidths, err = parseForWidths(o.forWidths); err != nil {
		return err
	}
	if opts.Compression, err = parseCompression(o.compression); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !g.JSON {
		opts.OnPlan = func(p plan.RewritePlan) { printRewritePlan(out, p) }
	}
	// The budget counts live entries; a soft limit makes the collector
	// reclaim spilled buffers before the heap grows to twice the live size.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(opts.Memory + plan.FixedOverhead/2))
	// Differences the self-check names stream as findings: to stderr
	// beside the human report, to stdout as JSON lines with --json.
	findingsTo := cmd.ErrOrStderr()
	if g.JSON {
		findingsTo = out
	}
	opts.Findings = streamer(findingsTo, g)
	sum, err := rewrite.Run(cmd.Context(), opts)
	if o.dryRun {
		return reportDryRun(cmd, g, "rewrite", sum, err)
	}
	if sum != nil && errors.Is(err, verify.ErrNotEqual) {
		// The output was proved wrong and not published: report it as
		// findings (exit 1), with the summary of what was done.
		if g.JSON {
			_ = writeJSON(out, rewriteReport{Rewrite: sum, PeakRSS: peakRSS(), Verification: sum.Verification})
		} else {
			fmt.Fprintln(out, sum.Verification.Detail)
		}
		return silentError{ErrFindings}
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(out, rewriteReport{Rewrite: sum, PeakRSS: peakRSS(), Verification: sum.Verification})
	}
	if o.buckets > snapshotfmt.WarnBuckets {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d buckets is above %d: every tool and the job pay a per-bucket bookkeeping cost\n", o.buckets, snapshotfmt.WarnBuckets)
	}
	fmt.Fprintf(out, "rewrote %s -> %s: %s entries, %s, %s %s/%d -> %s/%d in %s (%s)\n",
		source, o.out, units.Count(sum.Entries), units.Bytes(sum.SourceBytes), sum.Strategy,
		sum.From.Mapping, sum.From.Buckets, sum.To.Mapping, sum.To.Buckets,
		units.Duration(sum.Elapsed), units.Rate(sum.SourceBytes, sum.Elapsed))
	if sum.SpilledRuns > 0 {
		fmt.Fprintf(out, "spilled %s in %d sorted runs (removed)\n", units.Bytes(sum.SpilledBytes), sum.SpilledRuns)
	}
	reportTempDirs(out, sum.StaleRemoved, sum.Leftover)
	fmt.Fprintln(out, sum.Verification.Detail)
	return nil
}

// compressionFlagHelp is the --compression help of the commands that write
// snapshots.
const compressionFlagHelp = "SSTable block compression of the output: snappy, zstd (smaller, slower) or none (larger, least CPU)"

// parseCompression checks a --compression value (the writer's names).
func parseCompression(s string) (string, error) {
	switch s {
	case "snappy", "zstd", "none":
		return s, nil
	}
	return "", usagef(fmt.Errorf("--compression %q: want snappy, zstd or none", s))
}

func printRewritePlan(w io.Writer, p plan.RewritePlan) {
	fmt.Fprintf(w, "plan: %s, %s/%d -> %s/%d: %s\n", p.Strategy, p.From.Mapping, p.From.Buckets, p.To.Mapping, p.To.Buckets, p.Reason)
	fmt.Fprintf(w, "      read %s, write about %s", units.Bytes(p.ReadBytes), units.Bytes(p.WriteBytes))
	if p.SpillBytes > 0 {
		fmt.Fprintf(w, ", spill about %s (at most %s at once)", units.Bytes(p.SpillBytes), units.Bytes(p.TmpDiskBytes))
	}
	fmt.Fprintf(w, "; memory budget %s, expected peak %s\n", units.Bytes(p.Memory), units.Bytes(p.PeakMemory))
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "      warning: %s\n", warn)
	}
}

// peakRSS reads the resident high-water mark of this process from
// /proc/self/status (VmHWM). Unlike getrusage's maxrss it does not include
// the parent's memory when the process was started by vfork and exec.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
