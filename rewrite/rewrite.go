// Package rewrite moves a snapshot into a new bucket count (and, if asked,
// a new mapping) with a parallel in-process keyed pipeline: scanners read
// the source's files concurrently, every entry is rehashed to its new
// bucket and reaches the single owner of that bucket, and owners write
// through writer.BucketWriters. The strategy comes from plan.ForRewrite:
//
//   - split: each task streams one old bucket into one writer per new
//     bucket it feeds (a partition of a sorted stream is sorted), in
//     several passes past plan.MaxFanOut writers; no buffering.
//   - merge: each task k-way merges the few old buckets that feed its new
//     buckets, by the key after the bucket field; no buffering.
//   - shuffle: scanners route batches of entries over channels to owners
//     of contiguous target bucket ranges; owners sort with
//     internal/extsort in their share of the memory budget, spilling
//     sorted runs to a temporary directory, then write. Under mod to mod
//     the gcd(N, M) independent groups run one after another.
//
// In split and merge the task that reads an old bucket is itself the only
// owner of the new buckets it writes, so no entry crosses goroutines.
//
// Per-worker state is carried byte for byte; the states table and codec
// hints are kept (less dropped states, with renames); a lineage record is
// appended. The source is only read.
package rewrite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

// Options describe one rewrite. Source, Target and To.Buckets are required.
type Options struct {
	Source string
	Target string
	// To is the target partitioning; an empty Mapping or Hash means the
	// source's.
	To snapshotfmt.Partitioning
	// Parallelism bounds concurrent tasks (default GOMAXPROCS).
	Parallelism int
	// Memory is the budget in bytes (default plan.DefaultMemory()).
	Memory int64
	// TmpDir is where the shuffle spills (default: the target's parent
	// directory). A private directory is created in it and removed.
	TmpDir string
	// FileSize is the target data file size (default writer's).
	FileSize int64
	// ForWidths are widths whose workers' bucket ranges the files are cut
	// at besides the size cut, so a start at them ingests whole files (nil:
	// plan.DefaultCutWidths; empty and non-nil: none). The source's width
	// at write is always among them.
	ForWidths []int
	// Compression is passed to the writer.
	Compression string
	Force       bool
	Note        string
	Tool        string
	// DropStates lists STEP/NAME of keyed or per-worker states to leave out.
	DropStates []string
	// RenameStates lists STEP/OLD=NEW (or STEP/OLD=STEP2/NEW).
	RenameStates []string
	// SkipDiskCheck skips the free-space check (tests of other checks).
	SkipDiskCheck bool
	// Progress receives bytes of source read (logical: key plus value).
	Progress progress.Reporter
	// OnPlan, if set, is called with the plan after the checks and before
	// any work, so a command can print it.
	OnPlan func(plan.RewritePlan)
	// NoVerify skips the self-check. By default the rewrite takes the
	// fingerprints the target must have during the scan, reads the sealed
	// output back before publishing it, and publishes only what matches
	// (Summary.Verification); a mismatch is an error wrapping
	// verify.ErrNotEqual and leaves no target.
	NoVerify bool
	// Findings receives the differences the self-check names when the
	// output does not match (nil discards them).
	Findings verify.Sink
	// VerifyProgress receives bytes read back by the self-check.
	VerifyProgress progress.Reporter
	// DryRun runs the checks and makes the plan (OnPlan sees it), then
	// stops: nothing is written, no lock or temporary directory is taken.
	// The error is what the real run would refuse with; the Summary holds
	// the plan.
	DryRun bool
}

// Summary is what a rewrite did.
type Summary struct {
	Source         string                   `json:"source"`
	Target         string                   `json:"target"`
	Strategy       plan.Strategy            `json:"strategy"`
	From           snapshotfmt.Partitioning `json:"from"`
	To             snapshotfmt.Partitioning `json:"to"`
	Entries        uint64                   `json:"entries"`
	LogicalBytes   uint64                   `json:"logical_bytes"`
	SourceBytes    int64                    `json:"source_bytes"`
	TargetBytes    int64                    `json:"target_bytes"`
	TargetFiles    int                      `json:"target_files"`
	DroppedEntries uint64                   `json:"dropped_entries"`
	Dropped        []string                 `json:"dropped_states"`
	Renamed        []string                 `json:"renamed_states"`
	SpilledBytes   int64                    `json:"spilled_bytes"`
	SpilledRuns    int                      `json:"spilled_runs"`
	// Compression is the target's SSTable block compression.
	Compression string `json:"compression"`
	// Elapsed is the rewrite until its output was sealed, without the
	// self-check (Verification.Seconds) and publication.
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	// BytesPerSecond is source data bytes (on disk) per second of elapsed.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// StaleRemoved lists leftover temporary directories of dead runs on the
	// same target that were removed.
	StaleRemoved []string `json:"stale_removed"`
	// Leftover lists temporary directories beside the target that were
	// left alone (no dead run's marker: possibly the old target of an
	// interrupted --force), for the operator to look at.
	Leftover []string              `json:"leftover"`
	Plan     plan.RewritePlan      `json:"plan"`
	Manifest *snapshotfmt.Manifest `json:"-"`
	// Verification is what the self-check proved before publishing.
	Verification Verification `json:"-"`
}

// Run rewrites opts.Source into opts.Target.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	start := time.Now()
	if opts.Parallelism < 1 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Memory <= 0 {
		opts.Memory = plan.DefaultMemory()
	}
	src, err := reader.Open(opts.Source, reader.Options{})
	if err != nil {
		return nil, err
	}
	m := src.Manifest()
	to := opts.To
	if to.Hash == "" {
		to.Hash = snapshotfmt.HashName
	}
	if to.Mapping == "" {
		to.Mapping = m.Partitioning.Mapping
	}
	if to, err = snapshotfmt.NewPartitioning(to.Mapping, int(to.Buckets)); err != nil {
		return nil, err
	}
	if err := CheckPaths(opts.Source, opts.Target); err != nil {
		return nil, err
	}
	states, wstates, dropped, renamed, err := applyStateEdits(m, opts.DropStates, opts.RenameStates)
	if err != nil {
		return nil, err
	}
	p := plan.ForRewriteWith(m, to, plan.Resources{Memory: opts.Memory, Parallelism: opts.Parallelism})
	cutWidths := plan.DefaultCutWidths(int(to.Buckets), m.WidthAtWrite)
	if opts.ForWidths != nil {
		if cutWidths, err = plan.CheckCutWidths(append(slices.Clone(opts.ForWidths), m.WidthAtWrite)); err != nil {
			return nil, err
		}
	}
	p.CutWidths = cutWidths
	tmpRoot := opts.TmpDir
	if tmpRoot != "" {
		// Spill files are never written inside the source.
		if err := fsx.CheckOutside(tmpRoot, opts.Source); err != nil {
			return nil, err
		}
		if st, err := os.Stat(tmpRoot); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%w: --tmp %s is not an existing directory", snapshotfmt.ErrInvalidArgument, tmpRoot)
		}
	} else {
		abs, err := filepath.Abs(opts.Target)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", opts.Target, err)
		}
		tmpRoot = filepath.Dir(abs)
	}
	if !opts.SkipDiskCheck {
		if err := CheckDisk(opts.Target, tmpRoot, p.TargetDiskBytes, p.TmpDiskBytes); err != nil {
			return nil, err
		}
	}
	if opts.DryRun {
		if opts.OnPlan != nil {
			opts.OnPlan(p)
		}
		return &Summary{Source: opts.Source, Target: opts.Target, Strategy: p.Strategy, From: m.Partitioning, To: to,
			Entries: m.TotalEntries(), LogicalBytes: m.TotalBytes(), SourceBytes: m.DataBytes(),
			Dropped: append([]string{}, dropped...), Renamed: append([]string{}, renamed...),
			StaleRemoved: []string{}, Leftover: []string{}, Plan: p, Compression: cmp.Or(opts.Compression, "snappy"),
		}, writer.CheckTarget(opts.Target, opts.Force, "--out")
	}
	note := opts.Note
	var edits []string
	for _, d := range dropped {
		edits = append(edits, "dropped state "+d)
	}
	for _, r := range renamed {
		edits = append(edits, "renamed state "+r)
	}
	if len(edits) > 0 {
		note = strings.TrimPrefix(note+"; "+strings.Join(edits, "; "), "; ")
	}
	lineage := append(append([]snapshotfmt.Lineage{}, m.Lineage...), snapshotfmt.Lineage{
		Tool: opts.Tool, Action: "rewrite",
		FromBuckets: m.Partitioning.Buckets, FromMapping: m.Partitioning.Mapping,
		ToBuckets: to.Buckets, ToMapping: to.Mapping, Note: note,
	})
	w, err := writer.Create(opts.Target, writer.Header{
		Partitioning: to, WidthAtWrite: m.WidthAtWrite, States: states, Lineage: lineage, Tool: opts.Tool,
		CutWidths: cutWidths,
	}, writer.Options{FileSize: opts.FileSize, Force: opts.Force, Compression: opts.Compression})
	if err != nil {
		return nil, err
	}
	if opts.OnPlan != nil {
		opts.OnPlan(p)
	}
	prog := progress.OrNop(opts.Progress)
	s, err := newSource(src, opts.Source, prog)
	if err != nil {
		w.Abort()
		return nil, err
	}
	for _, st := range m.States {
		if !keptState(states, st.ID) {
			s.keep[st.ID] = false
		}
	}
	r := &run{opts: opts, src: s, w: w, to: to, plan: p, tmpRoot: tmpRoot, states: states, cutWidths: cutWidths}
	if p.Strategy != plan.StrategyShuffle { // a shuffle labels its own phases
		prog.Start(int64(m.TotalBytes()), fmt.Sprintf("%s %d->%d: read and write", p.Strategy, m.Partitioning.Buckets, to.Buckets))
	}
	err = r.work(ctx)
	prog.Finish()
	if err == nil {
		err = s.checkCounts()
	}
	if err == nil {
		err = copyWorkerStates(src, w, wstates)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	out, err := w.Seal()
	if err != nil {
		return nil, err
	}
	sum := &Summary{
		Source: opts.Source, Target: opts.Target, Strategy: p.Strategy, From: m.Partitioning, To: to,
		Entries: out.TotalEntries(), LogicalBytes: out.TotalBytes(), SourceBytes: m.DataBytes(),
		TargetBytes: out.DataBytes(), TargetFiles: len(out.Files), DroppedEntries: s.dropped.Load(),
		Dropped: dropped, Renamed: renamed, SpilledBytes: r.spilledBytes.Load(), SpilledRuns: int(r.spilledRuns.Load()),
		StaleRemoved: w.Stage().Removed, Leftover: w.Stage().Leftover, Plan: p, Manifest: out, Compression: cmp.Or(opts.Compression, "snappy"),
	}
	if sum.Dropped == nil {
		sum.Dropped = []string{}
	}
	if sum.Renamed == nil {
		sum.Renamed = []string{}
	}
	// Elapsed and the rate measure the rewrite itself; the self-check
	// reports its own time.
	sum.Elapsed = time.Since(start)
	sum.ElapsedSeconds = sum.Elapsed.Seconds()
	if sum.ElapsedSeconds > 0 {
		sum.BytesPerSecond = float64(sum.SourceBytes) / sum.ElapsedSeconds
	}
	// A bug that lost or invented entries must never be published.
	if want := m.TotalEntries() - sum.DroppedEntries; sum.Entries != want {
		w.Abort()
		return sum, fmt.Errorf("internal error: the output holds %d entries, the source %d less %d dropped; nothing was published", sum.Entries, m.TotalEntries(), sum.DroppedEntries)
	}
	if opts.NoVerify {
		sum.Verification = Verification{Checked: "skipped", Detail: "verification skipped (--no-verify): the output was not read back"}
	} else {
		v, err := selfCheck(ctx, opts, w.Dir(), src, sum, r.fp.Result())
		sum.Verification = v
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			w.Abort()
			return sum, fmt.Errorf("verify the output before publishing: %w", err)
		}
		if !v.Verified {
			w.Abort()
			return sum, fmt.Errorf("%w: %s", verify.ErrNotEqual, v.Detail)
		}
	}
	if err := w.Publish(); err != nil {
		return nil, err
	}
	return sum, nil
}

func keptState(states []snapshotfmt.State, id uint16) bool {
	for _, s := range states {
		if s.ID == id {
			return true
		}
	}
	return false
}

// applyStateEdits returns the target's states table and per-worker states
// after --drop-state and --rename-state, and the edits as reported.
func applyStateEdits(m *snapshotfmt.Manifest, drops, renames []string) (states []snapshotfmt.State, ws []workerStateOut, dropped, renamed []string, err error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", snapshotfmt.ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	known := map[string]bool{}
	for _, s := range m.States {
		known[s.QualifiedName()] = true
	}
	for _, s := range m.WorkerStates {
		known[s.QualifiedName()] = true
	}
	drop := map[string]bool{}
	for _, d := range drops {
		if !strings.Contains(d, "/") {
			return nil, nil, nil, nil, bad("--drop-state %q: want STEP/NAME", d)
		}
		if !known[d] {
			return nil, nil, nil, nil, bad("--drop-state %s: the snapshot has no such state", d)
		}
		if !drop[d] {
			dropped = append(dropped, d)
		}
		drop[d] = true
	}
	rename := map[string]string{}
	for _, r := range renames {
		old, nw, ok := strings.Cut(r, "=")
		step, _, ok2 := strings.Cut(old, "/")
		if !ok || !ok2 || nw == "" || step == "" {
			return nil, nil, nil, nil, bad("--rename-state %q: want STEP/OLD=NEW or STEP/OLD=STEP2/NEW", r)
		}
		if !strings.Contains(nw, "/") {
			nw = step + "/" + nw
		}
		ns, nn, _ := strings.Cut(nw, "/")
		if ns == "" || nn == "" {
			return nil, nil, nil, nil, bad("--rename-state %q: empty step or name", r)
		}
		if !known[old] {
			return nil, nil, nil, nil, bad("--rename-state %s: the snapshot has no such state", old)
		}
		if drop[old] {
			return nil, nil, nil, nil, bad("--rename-state %s: the state is also dropped", old)
		}
		if _, dup := rename[old]; dup {
			return nil, nil, nil, nil, bad("--rename-state %s given twice", old)
		}
		rename[old] = nw
		renamed = append(renamed, old+"="+nw)
	}
	apply := func(step, name string) (string, string) {
		if nw, ok := rename[step+"/"+name]; ok {
			s, n, _ := strings.Cut(nw, "/")
			return s, n
		}
		return step, name
	}
	names := map[string]bool{}
	for _, s := range m.States {
		if drop[s.QualifiedName()] {
			continue
		}
		s.Step, s.Name = apply(s.Step, s.Name)
		s.Entries = 0
		if names[s.QualifiedName()] {
			return nil, nil, nil, nil, bad("renaming gives two states the name %s", s.QualifiedName())
		}
		names[s.QualifiedName()] = true
		states = append(states, s)
	}
	wnames := map[string]bool{}
	for _, s := range m.WorkerStates {
		if drop[s.QualifiedName()] {
			continue
		}
		o := workerStateOut{src: s}
		o.step, o.name = apply(s.Step, s.Name)
		q := o.step + "/" + o.name
		if wnames[q] {
			return nil, nil, nil, nil, bad("renaming gives two per-worker states the name %s", q)
		}
		wnames[q] = true
		ws = append(ws, o)
	}
	return states, ws, dropped, renamed, nil
}

type workerStateOut struct {
	src        snapshotfmt.WorkerState
	step, name string
}

// copyWorkerStates carries per-worker state files byte for byte, once
// each has been decoded: a file whose items run past its end, that ends in
// a partial length, or whose item count is not the manifest's is damage
// (ErrCorrupt), never copied into an output that load would reject.
func copyWorkerStates(src *reader.Snapshot, w *writer.Snapshot, ws []workerStateOut) error {
	for _, o := range ws {
		raw := make([][]byte, len(o.src.Files))
		items := make([]uint64, len(o.src.Files))
		for i, wf := range o.src.Files {
			data, err := src.ReadWorkerFileRaw(wf)
			if err != nil {
				return err
			}
			if err := checkWorkerItems(data, o.src, wf); err != nil {
				return err
			}
			raw[i], items[i] = data, wf.Items
		}
		if err := w.WriteWorkerStateFiles(o.step, o.name, o.src.Rule, raw, items); err != nil {
			return err
		}
	}
	return nil
}

// checkWorkerItems decodes one per-worker state file and compares its item
// count with the manifest's.
func checkWorkerItems(data []byte, ws snapshotfmt.WorkerState, wf snapshotfmt.WorkerFile) error {
	items, err := snapshotfmt.DecodeWorkerItems(data)
	if err != nil {
		return fmt.Errorf("per-worker state %s, worker %d, %s: %w", ws.QualifiedName(), wf.Worker, wf.Path, err)
	}
	if uint64(len(items)) != wf.Items {
		return fmt.Errorf("%w: per-worker state %s, worker %d, %s: holds %d items, the manifest says %d", snapshotfmt.ErrCorrupt, ws.QualifiedName(), wf.Worker, wf.Path, len(items), wf.Items)
	}
	return nil
}

// CheckPaths refuses a target that is the source, lies inside it, or
// contains it (--force would then replace the source), whatever the
// spelling: the check every writer shares (fsx.CheckDisjoint).
func CheckPaths(source, target string) error {
	return fsx.CheckDisjoint(target, source)
}

// CheckDisk refuses when the filesystems of target and tmp lack the space
// the plan estimates (their sum when they are the same filesystem).
func CheckDisk(target, tmp string, targetBytes, tmpBytes int64) error {
	abs, err := filepath.Abs(target)
	if err != nil {
		return fmt.Errorf("target %s: %w", target, err)
	}
	tdir := filepath.Dir(abs)
	tfs, tfree, err := freeSpace(tdir)
	if err != nil {
		return err
	}
	need := targetBytes
	if tmpBytes > 0 {
		sfs, sfree, err := freeSpace(tmp)
		if err != nil {
			return err
		}
		if sfs == tfs {
			need += tmpBytes
		} else if sfree < tmpBytes {
			return fmt.Errorf("%w: not enough disk for spill files at %s: %s free, the plan needs about %s (choose another --tmp, or raise --memory)",
				snapshotfmt.ErrRefused, tmp, mib(sfree), mib(tmpBytes))
		}
	}
	if tfree < need {
		what := "the target"
		if need != targetBytes {
			what = "the target and the spill files (--tmp is on the same filesystem)"
		}
		return fmt.Errorf("%w: not enough disk at %s: %s free, %s need about %s",
			snapshotfmt.ErrRefused, tdir, mib(tfree), what, mib(need))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n) }

func freeSpace(dir string) (fsid [2]int32, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fsid, 0, fmt.Errorf("%w: %s does not exist", snapshotfmt.ErrInvalidArgument, dir)
		}
		return fsid, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Fsid.Val, int64(st.Bavail) * int64(st.Bsize), nil
}
