package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func init() { registerCommand(newInspectCommand) }

func newInspectCommand(g *globalOptions) *cobra.Command {
	var topKeys int
	cmd := &cobra.Command{
		Use:   "inspect SNAPSHOT",
		Short: "Show a snapshot's partitioning, states, files, lineage and per-worker load",
		Long: `inspect reads a snapshot's manifest (it does not scan the data; see verify)
and shows its bucket count and mapping, the width it was written at, its states
with their kinds and entry counts, files, totals, lineage, the per-worker load
at the width it was written, and a histogram of bucket sizes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd, g, args[0], topKeys)
		},
	}
	cmd.Flags().IntVar(&topKeys, "top-keys", 0, "also scan the data and name the K heaviest keys by bytes and their share of their bucket")
	return cmd
}

// inspectReport is the --json document of inspect.
type inspectReport struct {
	Snapshot     string                    `json:"snapshot"`
	Format       string                    `json:"format"`
	Version      int                       `json:"version"`
	TableFormat  string                    `json:"table_format"`
	Created      time.Time                 `json:"created"` // RFC 3339, as every timestamp of --json
	Tool         string                    `json:"tool"`
	Partitioning snapshotfmt.Partitioning  `json:"partitioning"`
	WidthAtWrite int                       `json:"width_at_write"`
	CutWidths    []int                     `json:"cut_widths"`
	Entries      uint64                    `json:"entries"`
	LogicalBytes uint64                    `json:"logical_bytes"`
	DataBytes    int64                     `json:"data_bytes"`
	States       []snapshotfmt.State       `json:"states"`
	WorkerStates []snapshotfmt.WorkerState `json:"worker_states"`
	Files        []snapshotfmt.DataFile    `json:"files"`
	Lineage      []snapshotfmt.Lineage     `json:"lineage"`
	Load         plan.WidthLoad            `json:"load_at_write_width"`
	Histogram    []plan.Bin                `json:"bucket_size_histogram"`
	BucketBytes  []uint64                  `json:"bucket_bytes"`
	Warnings     []string                  `json:"warnings"`
	HotKeys      *plan.HotKeys             `json:"hot_keys,omitempty"`
}

func runInspect(cmd *cobra.Command, g *globalOptions, dir string, topKeys int) error {
	if err := setPositive(cmd, plan.MaxTopKeys, "top-keys"); err != nil {
		return err
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return err
	}
	m := s.Manifest()
	rep := inspectReport{
		Snapshot: dir, Format: m.Format, Version: m.Version, TableFormat: m.TableFormat,
		Created: m.Created, Tool: m.Tool,
		Partitioning: m.Partitioning, WidthAtWrite: m.WidthAtWrite, CutWidths: append([]int{}, m.CutWidths...),
		Entries: m.TotalEntries(), LogicalBytes: m.TotalBytes(), DataBytes: m.DataBytes(),
		States: m.States, WorkerStates: m.WorkerStates, Files: m.Files, Lineage: m.Lineage,
		Load: plan.LoadAt(m, m.WidthAtWrite), Histogram: plan.BucketHistogram(m.BucketBytes, 10),
		BucketBytes: m.BucketBytes, Warnings: []string{},
	}
	if m.Partitioning.Buckets > snapshotfmt.WarnBuckets {
		rep.Warnings = append(rep.Warnings, bucketCostWarning(int(m.Partitioning.Buckets)))
	}
	if topKeys != 0 {
		h, err := scanTopKeys(cmd, g, s, topKeys)
		if err != nil {
			return err
		}
		rep.HotKeys = h
		rep.Warnings = append(rep.Warnings, h.DominanceWarnings()...)
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	renderInspect(cmd.OutOrStdout(), &rep)
	if rep.HotKeys != nil {
		renderHotKeys(cmd.OutOrStdout(), rep.HotKeys)
	}
	return nil
}

func bucketCostWarning(n int) string {
	return fmt.Sprintf("%d buckets is above %d: every bucket costs bookkeeping (manifest entries, per-bucket stats, file boundaries, restart metadata) whether or not it holds data", n, snapshotfmt.WarnBuckets)
}

func renderInspect(w io.Writer, r *inspectReport) {
	fmt.Fprintf(w, "snapshot     %s\n", r.Snapshot)
	fmt.Fprintf(w, "format       %s v%d, %s\n", r.Format, r.Version, r.TableFormat)
	fmt.Fprintf(w, "written      %s by %s\n", r.Created.Format("2006-01-02 15:04:05Z07:00"), r.Tool)
	fmt.Fprintf(w, "partitioning %d buckets, %s mapping of %s\n", r.Partitioning.Buckets, r.Partitioning.Mapping, r.Partitioning.Hash)
	fmt.Fprintf(w, "width        %d workers at write (at most %d can own state)\n", r.WidthAtWrite, r.Partitioning.Buckets)
	if len(r.CutWidths) > 0 {
		fmt.Fprintf(w, "cut for      widths %s: a load at these ingests every data file whole\n", compactInts(r.CutWidths))
	}
	fmt.Fprintf(w, "totals       %s entries, %s logical, %s in %d data files\n",
		units.Count(r.Entries), units.Bytes(int64(r.LogicalBytes)), units.Bytes(r.DataBytes), len(r.Files))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning      %s\n", warn)
	}
	fmt.Fprintf(w, "\nkeyed states\n")
	for _, s := range r.States {
		codecs := ""
		if s.KeyCodec != "" || s.SubKeyCodec != "" || s.ValueCodec != "" {
			codecs = fmt.Sprintf("  key=%s", or(s.KeyCodec, "bytes"))
			if s.Kind == snapshotfmt.KindMap {
				codecs += fmt.Sprintf(" sub_key=%s", or(s.SubKeyCodec, "bytes"))
			}
			codecs += fmt.Sprintf(" value=%s", or(s.ValueCodec, "bytes"))
		}
		fmt.Fprintf(w, "  %3d  %-28s %-6s %12s entries%s\n", s.ID, s.QualifiedName(), s.Kind, units.Count(s.Entries), codecs)
	}
	if len(r.WorkerStates) > 0 {
		fmt.Fprintf(w, "\nper-worker states\n")
		for _, ws := range r.WorkerStates {
			var items uint64
			for _, f := range ws.Files {
				items += f.Items
			}
			fmt.Fprintf(w, "  %-33s %-9s %d files, %s items\n", ws.QualifiedName(), ws.Rule, len(ws.Files), units.Count(items))
		}
	}
	fmt.Fprintf(w, "\nfiles\n")
	const maxFiles = 12
	for i, f := range r.Files {
		if i == maxFiles {
			fmt.Fprintf(w, "  ... %d more (--json lists all)\n", len(r.Files)-maxFiles)
			break
		}
		fmt.Fprintf(w, "  %-22s buckets %5d..%-5d %12s entries %10s\n", f.Path, f.BucketLo, f.BucketHi, units.Count(f.Entries), units.Bytes(f.Size))
	}
	fmt.Fprintf(w, "\nlineage\n")
	for _, l := range r.Lineage {
		from := ""
		if l.FromBuckets > 0 {
			from = fmt.Sprintf("%d %s -> ", l.FromBuckets, l.FromMapping)
		}
		note := ""
		if l.Note != "" {
			note = "  (" + l.Note + ")"
		}
		fmt.Fprintf(w, "  %s  %-9s %s%d %s  by %s%s\n", l.Time.Format("2006-01-02 15:04:05"), l.Action, from, l.ToBuckets, l.ToMapping, l.Tool, note)
	}
	renderLoad(w, r.Load)
	renderBucketSizes(w, r.BucketBytes)
}

// renderLoad prints the per-worker load at one width as a table and bars.
func renderLoad(w io.Writer, l plan.WidthLoad) {
	fmt.Fprintf(w, "\nper-worker load at width %d (%d buckets)\n", l.Width, l.Buckets)
	rows := make([]barRow, 0, len(l.Workers))
	for _, wk := range l.Workers {
		label := fmt.Sprintf("w%-3d", wk.Worker)
		if !wk.Owns {
			rows = append(rows, barRow{label: label, note: "idle: owns no bucket"})
			continue
		}
		rng := fmt.Sprintf("%d..%d", wk.BucketLo, wk.BucketHi)
		rows = append(rows, barRow{label: label, value: float64(wk.Bytes),
			note: fmt.Sprintf("buckets %-11s %11s entries %9s", rng, units.Count(wk.Entries), units.Bytes(int64(wk.Bytes)))})
	}
	if len(rows) > 64 || !l.AllListed {
		// Too many workers to draw one by one: show the extremes.
		fmt.Fprintf(w, "  %d workers; max %s, mean %s\n", l.Width, units.Bytes(int64(l.MaxBytes)), units.Bytes(int64(l.MeanBytes)))
	} else {
		drawBars(w, rows, 20) // 2+5+1+20+1+48: 77 columns
	}
	fmt.Fprintf(w, "  max/mean %.2f", l.Imbalance)
	if l.IdleCount > 0 {
		fmt.Fprintf(w, ", %d idle workers", l.IdleCount)
	}
	fmt.Fprintln(w)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
