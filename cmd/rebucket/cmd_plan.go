package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func init() { registerCommand(newPlanCommand) }

type planOptions struct {
	widths    []int
	buckets   int
	mapping   string
	memory    string
	recommend bool
	peak      int
	headroom  int
	topKeys   int
}

func newPlanCommand(g *globalOptions) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan [SNAPSHOT] [--widths LIST | --buckets M | --top-keys K] | plan --recommend --peak-width P",
		Short: "Plan capacity: per-worker load at widths, what a rewrite would do, which bucket count to choose, hot keys",
		Long: `plan answers what-if questions without changing anything.

  plan SNAPSHOT --widths 4,40,200
      for each width: whether a start can own state at it (W at most the
      bucket count N), which buckets each worker owns, entries and bytes per
      worker from the snapshot's real per-bucket sizes, max/mean imbalance,
      idle workers, and above N the ways out.
  plan SNAPSHOT --buckets M [--memory 4GiB] [--mapping mod|range]
      what a rewrite to M buckets would do: strategy, bytes read, written and
      spilled, disk and memory, and a time estimated from a scan measured on
      this machine.
  plan SNAPSHOT --top-keys K
      scans every entry and names the K heaviest keys by bytes, warning when
      one key dominates its bucket (more buckets will not spread it).
  plan --recommend --peak-width P [--headroom 4] [--widths LIST]
      the smallest bucket count of at least headroom x P that every width in
      the list divides (default: P and its divisors), alternatives that divide
      by more widths, their bookkeeping cost, and a paragraph for the job's
      deployment record. With a SNAPSHOT, its bucket count joins the widths
      (so the rewrite is a split): the count load, verify --width and
      plan --widths suggest for that snapshot, one rule everywhere.

Without a mode flag, plan SNAPSHOT shows the width at write and N.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.recommend {
				return nil
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd, g, o, args)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.widths, "widths", nil, "widths to plan (comma-separated); with --recommend, the widths the count must divide by")
	f.IntVar(&o.buckets, "buckets", 0, "plan a rewrite to this bucket count")
	f.StringVar(&o.mapping, "mapping", "", "mapping of the rewrite's target: mod or range (default: the snapshot's)")
	f.StringVar(&o.memory, "memory", "", "memory budget of the planned rewrite (default: a quarter of physical memory, as rewrite)")
	f.BoolVar(&o.recommend, "recommend", false, "recommend a bucket count for a job (needs --peak-width)")
	f.IntVar(&o.peak, "peak-width", 0, "the most workers the job will ever run (with --recommend)")
	f.IntVar(&o.headroom, "headroom", 4, "growth factor above the peak width the count must allow (with --recommend)")
	f.IntVar(&o.topKeys, "top-keys", 0, "scan the snapshot and name the K heaviest keys")
	return cmd
}

// planReport is the --json document of plan.
type planReport struct {
	Snapshot       string                    `json:"snapshot,omitempty"`
	Partitioning   *snapshotfmt.Partitioning `json:"partitioning,omitempty"`
	Entries        uint64                    `json:"entries,omitempty"`
	LogicalBytes   uint64                    `json:"logical_bytes,omitempty"`
	Widths         []plan.WidthPlan          `json:"widths,omitempty"`
	BucketBytes    []uint64                  `json:"bucket_bytes,omitempty"`
	Rewrite        *plan.RewritePlan         `json:"rewrite,omitempty"`
	Estimate       *plan.RewriteEstimate     `json:"rewrite_estimate,omitempty"`
	Recommendation *plan.Recommendation      `json:"recommendation,omitempty"`
	HotKeys        *plan.HotKeys             `json:"hot_keys,omitempty"`
	Warnings       []string                  `json:"warnings"`
}

func runPlan(cmd *cobra.Command, g *globalOptions, o *planOptions, args []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	rep := planReport{Warnings: []string{}}
	if err := checkPlanFlags(cmd, o); err != nil {
		return err
	}
	if o.recommend {
		if o.peak < 1 {
			return usagef(errors.New("--recommend needs --peak-width P (the most workers the job will run)"))
		}
		if len(args) == 0 {
			r, err := plan.Recommend(o.peak, o.headroom, o.widths)
			if err != nil {
				return usagef(err)
			}
			rep.Recommendation = &r
			rep.Warnings = append(rep.Warnings, r.Warnings...)
			return emitPlan(cmd, g, &rep)
		}
	} else if cmd.Flags().Changed("peak-width") || cmd.Flags().Changed("headroom") {
		return usagef(errors.New("--peak-width and --headroom go with --recommend"))
	}
	if len(args) == 0 {
		return usagef(errors.New("plan needs a SNAPSHOT (or --recommend --peak-width P)"))
	}
	s, err := reader.Open(args[0], reader.Options{})
	if err != nil {
		return err
	}
	m := s.Manifest()
	rep.Snapshot, rep.Partitioning = args[0], &m.Partitioning
	rep.Entries, rep.LogicalBytes = m.TotalEntries(), m.TotalBytes()
	n := int(m.Partitioning.Buckets)
	if n > snapshotfmt.WarnBuckets {
		rep.Warnings = append(rep.Warnings, plan.BookkeepingWarning(n))
	}
	widths := o.widths
	if o.recommend {
		// With a snapshot, its count joins the widths the recommendation
		// divides by, so the rewrite to it is a split: the count every
		// other suggestion for this snapshot names.
		r, err := plan.RecommendFor(n, o.peak, o.headroom, o.widths)
		if err != nil {
			return usagef(err)
		}
		rep.Recommendation = &r
		rep.Warnings = append(rep.Warnings, r.Warnings...)
		widths = nil // they were the recommendation's
	}
	if len(widths) == 0 && o.buckets == 0 && o.topKeys == 0 && !o.recommend {
		widths = []int{m.WidthAtWrite}
		if n != m.WidthAtWrite {
			widths = append(widths, n)
		}
	}
	for _, w := range widths {
		wp, err := plan.ForWidth(m, w)
		if err != nil {
			return usagef(err)
		}
		if wp.WaysOut != nil {
			wp.WaysOut = plan.WaysOut(args[0], n, w)
		}
		rep.Widths = append(rep.Widths, wp)
	}
	if len(rep.Widths) > 0 {
		rep.BucketBytes = m.BucketBytes
	}
	if o.buckets != 0 {
		mapping := m.Partitioning.Mapping
		if o.mapping != "" {
			if mapping, err = snapshotfmt.ParseMapping(o.mapping); err != nil {
				return usagef(err)
			}
		}
		target, err := snapshotfmt.NewPartitioning(mapping, o.buckets)
		if err != nil {
			return usagef(err)
		}
		mem, err := parseMemory(o.memory)
		if err != nil {
			return err
		}
		p := plan.ForRewrite(m, target, mem)
		rate, err := plan.MeasureScanRate(ctx, s, 64<<20)
		if err != nil {
			return err
		}
		disk, err := plan.MeasureDisk(os.TempDir())
		if err != nil {
			return err
		}
		e := plan.EstimateRewrite(p, rate, disk)
		rep.Rewrite, rep.Estimate = &p, &e
		rep.Warnings = append(rep.Warnings, p.Warnings...)
	}
	if o.topKeys != 0 {
		h, err := scanTopKeys(cmd, g, s, o.topKeys)
		if err != nil {
			return err
		}
		rep.HotKeys = h
		rep.Warnings = append(rep.Warnings, h.DominanceWarnings()...)
	}
	return emitPlan(cmd, g, &rep)
}

// maxPlanWidths bounds --widths: each width is planned worker by worker.
const maxPlanWidths = 64

// checkPlanFlags refuses zeros and values past the format's caps before
// anything is read.
func checkPlanFlags(cmd *cobra.Command, o *planOptions) error {
	if err := setPositive(cmd, snapshotfmt.MaxBuckets, "buckets", "peak-width", "headroom"); err != nil {
		return err
	}
	if err := setPositive(cmd, plan.MaxTopKeys, "top-keys"); err != nil {
		return err
	}
	if len(o.widths) > maxPlanWidths {
		return usagef(fmt.Errorf("--widths lists %d widths: plan at most %d at once", len(o.widths), maxPlanWidths))
	}
	for _, w := range o.widths {
		if w < 1 || w > snapshotfmt.MaxWidth {
			return usagef(fmt.Errorf("--widths: width %d: want 1..%d (the most workers a snapshot can record)", w, snapshotfmt.MaxWidth))
		}
	}
	return nil
}

// scanTopKeys runs the hot-key scan of plan and inspect --top-keys.
func scanTopKeys(cmd *cobra.Command, g *globalOptions, s *reader.Snapshot, k int) (*plan.HotKeys, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	h, err := plan.TopKeys(ctx, s, k, 0, newProgress(cmd, g))
	if errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		return nil, usagef(err)
	}
	return h, err
}

func emitPlan(cmd *cobra.Command, g *globalOptions, rep *planReport) error {
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	renderPlan(cmd.OutOrStdout(), rep)
	return nil
}

func renderPlan(w io.Writer, r *planReport) {
	if r.Snapshot != "" {
		fmt.Fprintf(w, "snapshot %s: %d buckets (%s), %s entries, %s logical\n", r.Snapshot, r.Partitioning.Buckets,
			r.Partitioning.Mapping, units.Count(r.Entries), units.Bytes(int64(r.LogicalBytes)))
	}
	for _, wp := range r.Widths {
		renderWidthPlan(w, wp)
	}
	if len(r.Widths) > 0 {
		renderBucketSizes(w, r.BucketBytes)
	}
	if r.Rewrite != nil {
		renderPlanRewrite(w, r.Rewrite, r.Estimate)
	}
	if r.HotKeys != nil {
		renderHotKeys(w, r.HotKeys)
	}
	if r.Recommendation != nil {
		renderRecommendation(w, r.Recommendation)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
		for _, warn := range r.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}
	}
}

func renderWidthPlan(w io.Writer, p plan.WidthPlan) {
	fmt.Fprintf(w, "\nwidth %d: ", p.Width)
	if p.Feasible {
		fmt.Fprintf(w, "feasible, every worker owns state (%d buckets over %d workers)\n", p.Buckets, p.Width)
	} else {
		fmt.Fprintf(w, "NOT feasible as asked: at most %d workers can own state with %d buckets; %d of %d workers would own nothing (idle: %s)\n",
			p.Buckets, p.Buckets, p.IdleCount, p.Width, plan.FormatRanges(p.IdleRanges, 16))
	}
	if p.FilesCut {
		fmt.Fprintf(w, "  files: cut for this width: a load ingests every data file whole\n")
	} else {
		fmt.Fprintf(w, "  files: not cut for this width: a load clips the files that straddle workers (`rewrite --for-width %d` cuts them)\n", p.Width)
	}
	fmt.Fprintf(w, "  buckets to workers:\n")
	const maxRows = 16
	for i, row := range p.Table {
		if i == maxRows {
			fmt.Fprintf(w, "    ... %d more rows (--json lists all)\n", len(p.Table)-maxRows)
			break
		}
		ws := fmt.Sprintf("w%d", row.WorkerLo)
		if row.WorkerHi > row.WorkerLo {
			ws = fmt.Sprintf("w%d..w%d", row.WorkerLo, row.WorkerHi)
		}
		if row.BucketsEach == 0 {
			fmt.Fprintf(w, "    %-14s own nothing\n", ws)
			continue
		}
		each := ""
		if row.WorkerHi > row.WorkerLo {
			each = " each"
		}
		fmt.Fprintf(w, "    %-14s %d bucket%s%s, buckets %d..%d\n", ws, row.BucketsEach, plural(row.BucketsEach), each, row.BucketLo, row.BucketHi)
	}
	renderLoad(w, p.WidthLoad)
	if len(p.WaysOut) > 0 {
		fmt.Fprintf(w, "  ways out:\n")
		for _, s := range p.WaysOut {
			fmt.Fprintf(w, "    - %s\n", s)
		}
	}
}

func renderPlanRewrite(w io.Writer, p *plan.RewritePlan, e *plan.RewriteEstimate) {
	fmt.Fprintf(w, "\nrewrite %d %s -> %d %s: %s\n", p.From.Buckets, p.From.Mapping, p.To.Buckets, p.To.Mapping, p.Strategy)
	fmt.Fprintf(w, "  why          %s\n", p.Reason)
	fmt.Fprintf(w, "  entries      %s (%s logical, %s of source files)\n", units.Count(p.Entries), units.Bytes(int64(p.LogicalBytes)), units.Bytes(p.SourceBytes))
	fmt.Fprintf(w, "  fan          out %d, in %d; %d writers per task, %d pass(es), %d group(s), parallelism %d\n", p.FanOut, p.FanIn, p.WritersPerTask, p.Passes, p.Groups, p.Parallelism)
	fmt.Fprintf(w, "  read         %s\n", units.Bytes(p.ReadBytes))
	fmt.Fprintf(w, "  write        %s\n", units.Bytes(p.WriteBytes))
	fmt.Fprintf(w, "  spill        %s at --memory %s (temporary disk at most %s)\n", units.Bytes(p.SpillBytes), units.Bytes(p.Memory), units.Bytes(p.TmpDiskBytes))
	fmt.Fprintf(w, "  disk needed  %s free on the target's filesystem\n", units.Bytes(p.TargetDiskBytes))
	fmt.Fprintf(w, "  memory       peak about %s\n", units.Bytes(p.PeakMemory))
	if e != nil {
		if e.Time > 0 {
			fmt.Fprintf(w, "  time         about %s, up to %s on a busy machine: copy work %s, disk writes %s, %d file fsyncs %s\n", units.Duration(e.Time),
				units.Duration(time.Duration(e.HighSeconds*float64(time.Second))),
				units.Duration(e.CPUTime), units.Duration(e.WriteTime), e.Files, units.Duration(e.FileTime))
		}
		fmt.Fprintf(w, "%s\n", wrap(fmt.Sprintf("(%s. Copy: %s in %d file(s) in %s, %s; disk (%s): %s, one small-file fsync %s.)",
			e.Basis, units.Bytes(e.Rate.Bytes), e.Rate.Files, units.Duration(e.Rate.Elapsed), units.Rate(e.Rate.Bytes, e.Rate.Elapsed),
			e.Disk.Dir, units.Rate(e.Disk.Bytes, e.Disk.Elapsed), units.Duration(e.Disk.FileFsync)), 78, "               "))
	}
}

func renderHotKeys(w io.Writer, h *plan.HotKeys) {
	fmt.Fprintf(w, "\nheaviest keys by bytes (all states and sub-keys; %s entries scanned)\n", units.Count(h.Scanned))
	rows := make([]barRow, len(h.Top))
	for i, k := range h.Top {
		label := k.Key
		if len(label) > 32 {
			label = label[:29] + "..."
		}
		rows[i] = barRow{label: label, value: float64(k.Bytes),
			note: fmt.Sprintf("%10s %8s entries  bucket %-5d %5.1f%% of it", units.Bytes(int64(k.Bytes)), units.Count(k.Entries), k.Bucket, 100*k.Share)}
	}
	drawBars(w, rows, 30)
}

func renderRecommendation(w io.Writer, r *plan.Recommendation) {
	fmt.Fprintf(w, "\nrecommended bucket count for a peak of %d workers (headroom %dx, widths %s): %d\n",
		r.PeakWidth, r.Headroom, compactInts(r.Widths), r.Recommended.Buckets)
	fmt.Fprintf(w, "  %-8s %-14s %-16s %-12s %s\n", "buckets", "even widths", "per worker @peak", "manifest", "divides by")
	for _, c := range append([]plan.CountOption{r.Recommended}, r.Alternatives...) {
		divs := c.Divisors
		more := ""
		if len(divs) > 16 {
			divs, more = divs[:16], " ..."
		}
		fmt.Fprintf(w, "  %-8d %-14d %-16g ~%-11s %s%s\n", c.Buckets, len(c.Divisors), c.BucketsPerWorkerAtPeak, units.Bytes(c.ManifestBytes), intsString(divs), more)
	}
	fmt.Fprintf(w, "\nfor the deployment record:\n\n%s\n", wrap(r.Record, 78, "  "))
}

// compactInts prints 1,2,3,7 as "1-3, 7".
// compactInts lists ints with runs as ranges: 0-3, 5, 7-9.
func compactInts(v []int) string { return plan.CompactInts(v) }

func intsString(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// wrap breaks text into lines of at most width characters, indented.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}
