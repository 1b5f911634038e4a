package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rebucket/rebucket/internal/fsx"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func init() { registerCommand(newLoadCommand) }

type loadOptions struct {
	width       int
	into        string
	onExcess    string
	workers     []int
	force       bool
	dryRun      bool
	parallelism int
	clip        string
}

func newLoadCommand(g *globalOptions) *cobra.Command {
	o := &loadOptions{}
	cmd := &cobra.Command{
		Use:   "load SNAPSHOT --width W --into DIR [--on-excess reject|cap|idle] [--workers LIST]",
		Short: "Build each worker's local Pebble store from a snapshot, as a restarting job would",
		Long: `load deals the snapshot's buckets to W workers (worker i owns buckets
ceil(i*N/W)..ceil((i+1)*N/W)-1) and builds, for each, DIR/worker-NNNN with:

  store/   a Pebble (pebble/v2) store holding exactly the worker's entries:
           data files wholly inside its range are ingested as files (linked
           or copied first; the snapshot is never handed to Pebble), files
           that straddle ranges are clipped (their in-range entries rewritten
           into a new table, then ingested);
  state/   its per-worker states after redistribution (split: round-robin,
           union: all items, broadcast: the one copy), a file per state.

With --clip excise a straddling file is ingested whole and the spans outside
the range are excised (Pebble keeps the file as virtual tables): nothing is
rewritten, at the price of each store keeping the whole file until its
compactions rewrite it (shared by hard links on one filesystem).

It then reads every store back and checks that together they hold every
entry exactly once, each in the worker owning its bucket, and writes
DIR/LOAD.json describing the load. DIR is built in a temporary directory
beside it and published by rename.

Above the bucket count N, --on-excess decides: reject (default) refuses,
naming the ceiling and the rewrite that raises it; cap loads N workers; idle
creates W workers, the surplus empty, and lists them.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLoad(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.width, "width", 0, "number of workers W of the start")
	f.StringVar(&o.into, "into", "", "directory to build the worker stores in (must not exist, or be empty)")
	f.StringVar(&o.onExcess, "on-excess", "reject", "a width above the bucket count: reject, cap or idle")
	f.IntSliceVar(&o.workers, "workers", nil, "build only these workers (comma-separated indexes; default all)")
	f.BoolVar(&o.force, "force", false, "replace a non-empty --into once the new one is complete")
	f.BoolVar(&o.dryRun, "dry-run", false, "run the checks and print which buckets each worker would own, build nothing: exit 0 when the load would start, else the refusal's code")
	f.IntVar(&o.parallelism, "parallelism", 0, "workers built at once (default: the number of cores)")
	f.StringVar(&o.clip, "clip", "rewrite", "files straddling a worker's range: rewrite (copy the in-range entries into a new table) or excise (ingest the whole file, then excise the rest: no rewrite, but each store keeps the whole file until compaction)")
	_ = cmd.MarkFlagRequired("width")
	_ = cmd.MarkFlagRequired("into")
	return cmd
}

// LoadRecordName is the file in DIR describing the load, for the job.
const loadRecordName = "LOAD.json"

type loadWorker struct {
	reader.StoreStats
	Dir          string `json:"dir"`
	StoreEntries uint64 `json:"store_entries"`
	Outside      uint64 `json:"store_entries_outside_range"`
	// The worker's times, in seconds as every duration of --json.
	PrepareSeconds float64 `json:"prepare_seconds"`
	RewriteSeconds float64 `json:"rewrite_seconds"`
	IngestSeconds  float64 `json:"ingest_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

type loadReport struct {
	Snapshot     string                   `json:"snapshot"`
	Into         string                   `json:"into"`
	Partitioning snapshotfmt.Partitioning `json:"partitioning"`
	Assignment   reader.Assignment        `json:"assignment"`
	Clip         reader.ClipMode          `json:"clip"`
	// FilesCut is true when the snapshot's files were cut for this width
	// (no file straddles two workers): every file is ingested whole.
	FilesCut     bool          `json:"files_cut_for_width"`
	CutWidths    []int         `json:"cut_widths"`
	Workers      []loadWorker  `json:"workers"`
	Entries      uint64        `json:"entries_expected"`
	StoreEntries uint64        `json:"entries_in_stores"`
	Complete     bool          `json:"complete"` // every worker was built
	Verified     bool          `json:"verified"`
	IngestTime   time.Duration `json:"-"`
	PrepareTime  time.Duration `json:"-"`
	RewriteTime  time.Duration `json:"-"`
	BuildTime    time.Duration `json:"-"`
	VerifyTime   time.Duration `json:"-"`
	Time         time.Duration `json:"-"`
	// The times in seconds (ingest, prepare and rewrite summed over the
	// workers), as every duration of --json.
	IngestSeconds  float64  `json:"ingest_seconds"`
	PrepareSeconds float64  `json:"prepare_seconds"`
	RewriteSeconds float64  `json:"rewrite_seconds"`
	BuildSeconds   float64  `json:"build_seconds"`
	VerifySeconds  float64  `json:"verify_seconds"`
	ElapsedSeconds float64  `json:"elapsed_seconds"`
	StaleRemoved   []string `json:"stale_removed"`
	Leftover       []string `json:"leftover"`
}

func runLoad(cmd *cobra.Command, g *globalOptions, o *loadOptions, src string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	policy, err := reader.ParsePolicy(o.onExcess)
	if err != nil {
		return usagef(err)
	}
	clip, err := reader.ParseClipMode(o.clip)
	if err != nil {
		return usagef(err)
	}
	if err := checkWidthFlag(cmd, "width"); err != nil {
		return err
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		return err
	}
	l, err := s.NewLoader(o.width, policy)
	if err != nil {
		return loadRefusal(err, src, o.into, o.width) // ErrRefused under reject: exit 3
	}
	workers := o.workers
	if len(workers) == 0 {
		for i := 0; i < l.Width(); i++ {
			workers = append(workers, i)
		}
	}
	workers = slices.Clone(workers)
	slices.Sort(workers)
	workers = slices.Compact(workers)
	for _, i := range workers {
		if i < 0 || i >= l.Width() {
			return usagef(fmt.Errorf("--workers: worker %d does not exist; this start has workers 0..%d", i, l.Width()-1))
		}
	}
	if err := plan.CheckLoadStores(len(workers), l.Width(), len(l.Assignment().Idle)); err != nil {
		return usagef(err)
	}
	if err := refuseOverlap([]string{o.into}, nil, src); err != nil {
		return err
	}
	if o.dryRun {
		a := l.Assignment()
		err := writer.CheckTargetKind(o.into, o.force, "--into", loadKind)
		if !g.JSON {
			fmt.Fprintf(cmd.OutOrStdout(), "load %s into %s: %d buckets over %d workers (%d to build)", src, o.into, a.Buckets, a.Width, len(workers))
			if len(a.Idle) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), ", %d own nothing: workers %s", len(a.Idle), compactInts(a.Idle))
			}
			fmt.Fprintln(cmd.OutOrStdout())
		}
		return reportDryRun(cmd, g, "load", a, err)
	}
	stage, err := writer.BeginKind(o.into, o.force, nil, loadKind)
	if err != nil {
		return writer.RenameFlag(err, "--into")
	}
	defer stage.Abort()
	m := s.Manifest()
	rep := loadReport{Snapshot: src, Into: stage.Target(), Partitioning: m.Partitioning, Assignment: l.Assignment(), Clip: clip,
		FilesCut: plan.CutFor(m, l.Width()), CutWidths: append([]int{}, m.CutWidths...),
		StaleRemoved: stage.Removed, Leftover: stage.Leftover,
		Workers: make([]loadWorker, len(workers)), Complete: len(workers) == l.Width()}

	par := o.parallelism
	if par < 1 {
		par = runtime.GOMAXPROCS(0)
	}
	prog := newProgress(cmd, g)
	progress.StartUnit(prog, int64(len(workers)), "load: build the worker stores", progress.Workers)
	buildStart := time.Now()
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(par)
	for k, i := range workers {
		eg.Go(func() error {
			name := fmt.Sprintf("worker-%04d", i)
			st, err := l.BuildStoreWith(ectx, i, filepath.Join(stage.Dir(), name), reader.BuildOptions{Clip: clip})
			if err != nil {
				return fmt.Errorf("worker %d: %w", i, err)
			}
			rep.Workers[k] = loadWorker{StoreStats: st, Dir: name, PrepareSeconds: st.PrepareTime.Seconds(),
				RewriteSeconds: st.RewriteTime.Seconds(), IngestSeconds: st.IngestTime.Seconds(), ElapsedSeconds: st.Time.Seconds()}
			prog.Add(1)
			return nil
		})
	}
	err = eg.Wait()
	prog.Finish()
	if err != nil {
		return err
	}
	rep.BuildTime = time.Since(buildStart)

	// Read every store back: together they must hold each entry once, in
	// its owner's store.
	verifyStart := time.Now()
	progress.StartUnit(prog, int64(len(rep.Workers)), "load: read the stores back", progress.Workers)
	eg, ectx = errgroup.WithContext(ctx)
	eg.SetLimit(par)
	for k := range rep.Workers {
		eg.Go(func() error {
			wk := &rep.Workers[k]
			c, err := l.CheckStore(ectx, wk.Worker, filepath.Join(stage.Dir(), wk.Dir))
			if err != nil {
				return fmt.Errorf("worker %d: %w", wk.Worker, err)
			}
			wk.StoreEntries, wk.Outside = c.Entries, c.Outside
			prog.Add(1)
			return nil
		})
	}
	err = eg.Wait()
	prog.Finish()
	if err != nil {
		return err
	}
	rep.VerifyTime = time.Since(verifyStart)
	var bad []string
	for _, wk := range rep.Workers {
		rep.Entries += wk.Entries
		rep.StoreEntries += wk.StoreEntries
		rep.IngestTime += wk.IngestTime
		rep.PrepareTime += wk.PrepareTime
		rep.RewriteTime += wk.RewriteTime
		if wk.StoreEntries != wk.Entries || wk.Outside != 0 {
			bad = append(bad, fmt.Sprintf("worker %d holds %d entries (%d outside its buckets), the snapshot has %d in its buckets",
				wk.Worker, wk.StoreEntries, wk.Outside, wk.Entries))
		}
	}
	if rep.Complete && rep.Entries != m.TotalEntries() {
		bad = append(bad, fmt.Sprintf("the workers' buckets hold %d entries, the snapshot %d", rep.Entries, m.TotalEntries()))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", reader.ErrLoadMismatch, strings.Join(bad, "; "))
	}
	rep.Verified = true
	rep.setTime(time.Since(start))
	rec, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage.Dir(), loadRecordName), append(rec, '\n'), fsx.FilePerm); err != nil {
		return fmt.Errorf("write %s: %w", loadRecordName, err)
	}
	if err := stage.Publish(); err != nil {
		return err
	}
	rep.setTime(time.Since(start))
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	renderLoadReport(cmd.OutOrStdout(), &rep)
	return nil
}

// MarshalJSON writes an idle worker's bucket bounds as null, not -1.
func (w loadWorker) MarshalJSON() ([]byte, error) {
	type plain loadWorker
	null := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		BucketLo *int `json:"bucket_lo"`
		BucketHi *int `json:"bucket_hi"`
	}{plain(w), null(w.BucketLo), null(w.BucketHi)})
}

// setTime sets the total time and every duration in seconds.
func (r *loadReport) setTime(total time.Duration) {
	r.Time = total
	r.IngestSeconds, r.PrepareSeconds, r.RewriteSeconds = r.IngestTime.Seconds(), r.PrepareTime.Seconds(), r.RewriteTime.Seconds()
	r.BuildSeconds, r.VerifySeconds, r.ElapsedSeconds = r.BuildTime.Seconds(), r.VerifyTime.Seconds(), total.Seconds()
}

func renderLoadReport(w io.Writer, r *loadReport) {
	a := r.Assignment
	fmt.Fprintf(w, "loaded %s into %s: %d buckets over %d workers", r.Snapshot, r.Into, a.Buckets, a.Width)
	switch {
	case a.Policy == reader.PolicyCap && a.Requested > a.Width:
		fmt.Fprintf(w, " (asked for %d; --on-excess cap started %d, the bucket count)", a.Requested, a.Width)
	case len(a.Idle) > 0:
		fmt.Fprintf(w, " (--on-excess idle: %d own nothing: workers %s)", len(a.Idle), compactInts(a.Idle))
	}
	fmt.Fprintln(w)
	if r.FilesCut {
		fmt.Fprintf(w, "  the data files were cut for %d workers: every file ingested whole\n", a.Width)
	} else {
		cut := "none"
		if len(r.CutWidths) > 0 {
			cut = compactInts(r.CutWidths)
		}
		fmt.Fprintf(w, "  the data files were not cut for %d workers (cut for: %s): files straddling two workers are clipped; `rewrite --for-width %d` cuts them\n", a.Width, cut, a.Width)
	}
	clipped := "rewritten"
	if r.Clip == reader.ClipExcise {
		clipped = "excised"
	}
	fmt.Fprintf(w, "  %-7s %-13s %12s %10s %9s %9s %9s\n", "worker", "buckets", "entries", "bytes", "ingested", clipped, "time")
	const maxRows = 64
	for k, wk := range r.Workers {
		if k == maxRows {
			fmt.Fprintf(w, "  ... %d more workers (--json or %s lists all)\n", len(r.Workers)-maxRows, loadRecordName)
			break
		}
		rng := "idle"
		if wk.Owns {
			rng = fmt.Sprintf("%d..%d", wk.BucketLo, wk.BucketHi)
		}
		fmt.Fprintf(w, "  w%-6d %-13s %12s %10s %9d %9d %9s\n", wk.Worker, rng, units.Count(wk.StoreEntries),
			units.Bytes(int64(wk.Bytes)), wk.IngestedFiles, wk.RewrittenFiles+wk.ExcisedFiles, units.Duration(wk.Time))
	}
	fmt.Fprintf(w, "  build %s (summed over workers: link/copy and checksum %s, clip rewrite %s, Pebble ingest and excise %s); read-back %s; total %s\n",
		units.Duration(r.BuildTime), units.Duration(r.PrepareTime), units.Duration(r.RewriteTime), units.Duration(r.IngestTime),
		units.Duration(r.VerifyTime), units.Duration(r.Time))
	if r.Complete {
		stores := fmt.Sprintf("the %d stores hold", len(r.Workers))
		if len(r.Workers) == 1 {
			stores = "the store holds"
		}
		fmt.Fprintf(w, "  verified: %s all %s entries exactly once, each in the worker owning its bucket\n", stores, units.Count(r.StoreEntries))
	} else {
		fmt.Fprintf(w, "  verified: the %d stores built hold their %s entries exactly once (only --workers were built)\n", len(r.Workers), units.Count(r.StoreEntries))
	}
	reportTempDirs(w, r.StaleRemoved, r.Leftover)
}
