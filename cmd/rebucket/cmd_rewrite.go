package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/rewrite"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

func init() { registerCommand(newRewriteCommand) }

type rewriteOptions struct {
	buckets, parallelism      int
	out, mapping, memory, tmp string
	fileSize, note            string
	force, noVerify           bool
	dropStates, renameStates  []string
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

Peak memory stays within --memory plus a fixed overhead of about 96 MiB.
SOURCE is only read. TARGET must not exist or be empty (else --force, which
replaces it only once the new one is complete). Free disk at TARGET and
--tmp is checked against the plan's estimate first. Ctrl-C removes every
temporary and spill file and leaves no TARGET.

Unless --no-verify, the output then proves itself: fingerprints of SOURCE's
entries are taken during the scan, TARGET is read back (checksums checked) and
must match them bucket by bucket, with every entry in the bucket its key hashes
to, agreeing stats and byte-identical per-worker state (dropped and renamed
states are accounted for). On a mismatch SOURCE is compared exactly and the
differing keys are listed; the exit code is then 1.`,
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
	f.StringVar(&o.note, "note", "", "note recorded in the lineage")
	f.BoolVar(&o.force, "force", false, "replace a non-empty TARGET once the new snapshot is complete")
	f.BoolVar(&o.noVerify, "no-verify", false, "skip proving the output against SOURCE")
	f.StringArrayVar(&o.dropStates, "drop-state", nil, "leave out state STEP/NAME (repeatable; recorded in the lineage)")
	f.StringArrayVar(&o.renameStates, "rename-state", nil, "rename state STEP/OLD=NEW (repeatable; recorded in the lineage)")
	return cmd
}

// rewriteReport is the --json document.
type rewriteReport struct {
	Rewrite *rewrite.Summary `json:"rewrite"`
	// PeakRSS is the process's peak resident memory during the rewrite
	// (before verification), 0 where the system does not say.
	PeakRSS      int64               `json:"peak_rss_bytes"`
	Verification verificationSummary `json:"verification"`
}

type verificationSummary struct {
	// Checked is "fingerprints" (the target read back against the
	// fingerprints of the source taken during the scan), "equality" (when
	// those differed, the exact comparison that names keys ran too) or
	// "skipped".
	Checked  string         `json:"checked"`
	Verified bool           `json:"verified"`
	Detail   string         `json:"detail"`
	Errors   int            `json:"errors"`
	ByKind   map[string]int `json:"by_kind,omitempty"`
	Seconds  float64        `json:"elapsed_seconds"`
}

func runRewrite(cmd *cobra.Command, g *globalOptions, o *rewriteOptions, source string) error {
	opts := rewrite.Options{
		Source: source, Target: o.out, Parallelism: o.parallelism, TmpDir: o.tmp, Force: o.force,
		Note: o.note, Tool: toolName(), DropStates: o.dropStates, RenameStates: o.renameStates,
		Progress: newProgress(cmd, g), Fingerprint: !o.noVerify,
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
	out := cmd.OutOrStdout()
	if !g.JSON {
		opts.OnPlan = func(p plan.RewritePlan) { printRewritePlan(out, p) }
	}
	// The budget counts live entries; a soft limit makes the collector
	// reclaim spilled buffers before the heap grows to twice the live size.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(opts.Memory + plan.FixedOverhead/2))
	ctx := cmd.Context()
	sum, err := rewrite.Run(ctx, opts)
	if err != nil {
		return err
	}
	if o.buckets > snapshotfmt.WarnBuckets && !g.JSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d buckets is above %d: every tool and the job pay a per-bucket bookkeeping cost\n", o.buckets, snapshotfmt.WarnBuckets)
	}
	if !g.JSON {
		fmt.Fprintf(out, "rewrote %s -> %s: %s entries, %s, %s %s/%d -> %s/%d in %s (%s)\n",
			source, o.out, units.Count(sum.Entries), units.Bytes(sum.SourceBytes), sum.Strategy,
			sum.From.Mapping, sum.From.Buckets, sum.To.Mapping, sum.To.Buckets,
			units.Duration(sum.Elapsed), units.Rate(sum.SourceBytes, sum.Elapsed))
		if sum.SpilledRuns > 0 {
			fmt.Fprintf(out, "spilled %s in %d sorted runs (removed)\n", units.Bytes(sum.SpilledBytes), sum.SpilledRuns)
		}
		for _, p := range sum.StaleRemoved {
			fmt.Fprintf(out, "removed the temporary directory of a dead run: %s\n", p)
		}
	}
	peak := peakRSS()
	vs, verr := verifyRewrite(ctx, cmd, g, o, source, sum)
	if g.JSON {
		if err := writeJSON(out, rewriteReport{Rewrite: sum, PeakRSS: peak, Verification: vs}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, vs.Detail)
	}
	if verr != nil {
		return verr
	}
	if vs.Errors > 0 {
		return silentError{ErrFindings}
	}
	return nil
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

// verifyRewrite proves the output (DESIGN.md section 6): the fingerprints
// of the source's entries, taken during the scan in the target layout, must
// equal those of the target read back (every file's checksum checked), every
// target entry must sit in the bucket its key hashes to, the bucket stats
// must agree, and per-worker state must be byte-identical. Only when that
// fails is the source read again, by verify.Equal, to name the differing
// keys. Findings stream to stderr (human) or stdout (--json).
func verifyRewrite(ctx context.Context, cmd *cobra.Command, g *globalOptions, o *rewriteOptions, source string, sum *rewrite.Summary) (verificationSummary, error) {
	if o.noVerify {
		return verificationSummary{Checked: "skipped", Detail: "verification skipped (--no-verify): the output was not read back"}, nil
	}
	start := time.Now()
	vs := verificationSummary{Checked: "fingerprints", ByKind: map[string]int{}}
	fail := func(err error) (verificationSummary, error) {
		vs.Detail = "verification could not run: " + err.Error()
		return vs, err
	}
	if sum.Fingerprints == nil {
		return fail(fmt.Errorf("the rewrite took no fingerprints"))
	}
	tgt, err := reader.Open(o.out, reader.Options{})
	if err != nil {
		return fail(err)
	}
	var misplaced atomic.Int64
	got, err := verify.Fingerprints(ctx, tgt, sum.To, verify.FingerprintOptions{
		Parallelism: o.parallelism, Progress: newProgress(cmd, g),
		OnEntry: func(_, _ []byte, bucket, stored uint32) {
			if bucket != stored {
				misplaced.Add(1)
			}
		},
	})
	if err != nil {
		return fail(err)
	}
	m := tgt.Manifest()
	differ := sum.Fingerprints.Differ(got)
	stats := 0
	for b, fp := range got.Buckets {
		if fp.Count != m.BucketEntries[b] {
			stats++
		}
	}
	workers, err := sameWorkerState(source, tgt, sum.Renamed)
	if err != nil {
		return fail(err)
	}
	note := func(kind string, n int) {
		if n > 0 {
			vs.ByKind[kind] += n
			vs.Errors += n
		}
	}
	note("fingerprint", len(differ))
	note("misplaced", int(misplaced.Load()))
	note("bucket_stats", stats)
	note("worker_state", workers)
	vs.Seconds = time.Since(start).Seconds()
	if vs.Errors == 0 {
		vs.Verified = true
		vs.Detail = fmt.Sprintf("verified in %s: the target's %s entries, read back with every file's checksum checked, match the fingerprints of the source's entries taken during the scan in all %d buckets; every entry is in the bucket its key hashes to, the bucket stats agree, per-worker state is byte-identical (%d states)",
			units.Duration(time.Since(start)), units.Count(m.TotalEntries()), len(got.Buckets), len(m.WorkerStates))
		return vs, nil
	}
	vs.Detail = fmt.Sprintf("verification FAILED: %d fingerprint buckets differ, %d misplaced entries, %d buckets with wrong stats, %d per-worker state files differ",
		len(differ), misplaced.Load(), stats, workers)
	if len(o.dropStates) == 0 && len(o.renameStates) == 0 {
		// Name the differing keys.
		sinkW := cmd.ErrOrStderr()
		if g.JSON {
			sinkW = cmd.OutOrStdout()
		}
		es, err := verify.Equal(ctx, o.out, source, verify.EqualOptions{Parallelism: o.parallelism}, streamer(sinkW, g))
		if err != nil {
			return fail(err)
		}
		vs.Checked = "equality"
		vs.Detail += fmt.Sprintf("; the exact comparison with SOURCE found %d errors (%s)", es.Errors, kindCounts(es.ByKind))
	}
	return vs, nil
}

// sameWorkerState counts the per-worker state files of the target whose
// bytes differ from the source's (under the renames "OLD=NEW"); reading
// them checks their checksums.
func sameWorkerState(source string, tgt *reader.Snapshot, renamed []string) (int, error) {
	src, err := reader.Open(source, reader.Options{})
	if err != nil {
		return 0, err
	}
	oldName := map[string]string{}
	for _, r := range renamed {
		old, nw, _ := strings.Cut(r, "=")
		oldName[nw] = old
	}
	byName := map[string]snapshotfmt.WorkerState{}
	for _, ws := range src.Manifest().WorkerStates {
		byName[ws.QualifiedName()] = ws
	}
	bad := 0
	for _, ws := range tgt.Manifest().WorkerStates {
		q := ws.QualifiedName()
		if old, ok := oldName[q]; ok {
			q = old
		}
		sws, ok := byName[q]
		if !ok || sws.Rule != ws.Rule || len(sws.Files) != len(ws.Files) {
			bad++
			continue
		}
		for i, wf := range ws.Files {
			a, err := tgt.ReadWorkerFileRaw(wf)
			if err != nil {
				return 0, err
			}
			b, err := src.ReadWorkerFileRaw(sws.Files[i])
			if err != nil {
				return 0, err
			}
			if string(a) != string(b) {
				bad++
			}
		}
	}
	return bad, nil
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
