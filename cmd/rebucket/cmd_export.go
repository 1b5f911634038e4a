package main

import (
	"fmt"
	"github.com/rebucket/rebucket/snapshotfmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/reader"
)

func init() { registerCommand(newExportCommand) }

type exportOptions struct {
	format, out, bucketRange, worker, partitionBy, compression string
	states                                                     []string
	rowGroupSize, batchRows, parallelism                       int
	force                                                      bool
}

func newExportCommand(g *globalOptions) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export SNAPSHOT --out PATH [--format parquet|arrow|jsonl] [flags]",
		Short: "Export a snapshot (or part of it) to Parquet, Arrow IPC or JSON Lines",
		Long: `export writes a snapshot's keyed entries as a table with the columns bucket,
step, state, key, sub_key (null unless map state) and value, plus decoded
columns where the states' codec hints allow (key_utf8, value_int64,
value_json, ...; null on rows whose state lacks the hint).

Parquet is zstd-compressed by default, with column statistics; Arrow IPC is
uncompressed by default, so that every Arrow library (JavaScript's
apache-arrow has no zstd codec) reads it. Both keep the
snapshot's manifest, its partitioning and a description of the export in the
file's key-value metadata (rebucket.manifest, rebucket.partitioning,
rebucket.export), which 'rebucket import' uses to rebuild the snapshot.
--partition-by writes a directory in the Hive layout (step=S/state=N/ or
bucket=B/) that pyarrow, DuckDB and Spark read as partitions.

Per-worker state goes to its own table: OUT.workers.EXT beside a file, or
_rebucket/worker_state.parq (.ipc, .ndjson) inside a partitioned directory,
out of the way of globs such as dir/**/*.parquet. JSON Lines is for small
exports meant for eyes and grep: bytes are base64 (key_base64, ...) unless a
codec hint decodes them.

The format comes from --format or else from the extension of --out
(.parquet, .arrow/.feather/.ipc, .jsonl/.ndjson/.json; Parquet when there
is none); a --format that disagrees with the extension is refused.
The output is written under a temporary name and renamed into place, so
--out - (standard output) is refused: write a file and read it from there.

A Spark checkpoint exports to a directory, --out DIR, of one Parquet (or
Arrow) table per operator and store, <id>-<store>.parquet, with the
columns operator, operator_name, store, partition, key and value (structs
of the state schema's typed fields), and _rebucket_export.json; or, to an
--out ending in .jsonl, one JSON Lines file.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "output format: parquet, arrow (IPC file) or jsonl (default: from --out's extension .parquet, .arrow/.feather, .jsonl/.json; else parquet)")
	f.StringVar(&o.out, "out", "", "output file (or directory with --partition-by)")
	_ = cmd.MarkFlagRequired("out")
	f.StringArrayVar(&o.states, "state", nil, "export only this state, STEP/NAME (repeatable)")
	f.StringVar(&o.bucketRange, "bucket-range", "", "export only buckets LO-HI (inclusive)")
	f.StringVar(&o.worker, "worker", "", "export only the buckets worker I of width W owns, as I/W")
	f.StringVar(&o.partitionBy, "partition-by", "", "write a Hive-style directory partitioned by state or bucket")
	f.StringVar(&o.compression, "compression", "", "zstd, snappy (Parquet only) or none; default zstd for Parquet, none for Arrow (JavaScript's apache-arrow reads no zstd); applies to the per-worker table too")
	f.IntVar(&o.rowGroupSize, "row-group-size", dataset.DefaultRowGroupRows, "rows per Parquet row group")
	f.IntVar(&o.batchRows, "batch-rows", reader.DefaultBatchRows, "rows per Arrow record batch")
	f.IntVar(&o.parallelism, "parallelism", 0, "data files read at once (default: all cores)")
	f.BoolVar(&o.force, "force", false, "replace an existing output")
	return cmd
}

// parseRange parses LO-HI.
func parseRange(s string) (uint32, uint32, error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	hi, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil || lo > hi {
		return 0, 0, fmt.Errorf("--bucket-range %q: want LO-HI with LO <= HI", s)
	}
	return uint32(lo), uint32(hi), nil
}

// parseWorker parses I/W.
func parseWorker(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	w, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || w < 1 || i < 0 || i >= w {
		return 0, 0, fmt.Errorf("--worker %q: want I/W with 0 <= I < W", s)
	}
	return i, w, nil
}

func runExport(cmd *cobra.Command, g *globalOptions, o *exportOptions, src string) error {
	// A name that contradicts --format is refused after the safety checks
	// (writing into the snapshot is a refusal whatever the name says).
	format, formatErr := exportFormat(o, cmd.Flags().Changed("format"))
	if formatErr != nil && format == "" {
		return usagef(formatErr)
	}
	if o.partitionBy != "" && o.partitionBy != "state" && o.partitionBy != "bucket" {
		return usagef(fmt.Errorf("--partition-by %q: want state or bucket", o.partitionBy))
	}
	if o.rowGroupSize < 1 || o.batchRows < 1 {
		return usagef(fmt.Errorf("--row-group-size and --batch-rows must be at least 1"))
	}
	opts := dataset.ExportOptions{
		Format: format, PartitionBy: o.partitionBy, Compression: o.compression,
		RowGroupRows: int64(o.rowGroupSize), Force: o.force, Tool: toolName(),
		Progress: relabel(newProgress(cmd, g), "export: read and write"),
		View:     reader.ArrowOptions{States: o.states, BatchRows: o.batchRows, Parallelism: o.parallelism},
	}
	if o.bucketRange != "" {
		lo, hi, err := parseRange(o.bucketRange)
		if err != nil {
			return usagef(err)
		}
		opts.View.BucketRange, opts.View.BucketLo, opts.View.BucketHi = true, lo, hi
	}
	if o.worker != "" {
		i, w, err := parseWorker(o.worker)
		if err != nil {
			return usagef(err)
		}
		opts.View.Worker, opts.View.Width = i, w
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		return err
	}
	if err := refuseOverlap([]string{o.out}, nil, src); err != nil {
		return err
	}
	if formatErr != nil {
		return usagef(formatErr)
	}
	res, err := dataset.Export(cmd.Context(), s, o.out, opts)
	if err != nil {
		return err
	}
	warnings := exportWarnings(o, s.Manifest(), res.Rows)
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{
			"warnings": warnings,
			"snapshot": src, "out": res.Path, "format": res.Format, "partition_by": res.PartitionBy,
			"rows": res.Rows, "state_rows": res.StateRows, "files": res.Files, "bytes": res.Bytes,
			"worker_state_file": res.WorkerStateFile, "worker_state_items": res.WorkerStateItems,
			"snapshot_data_bytes": s.Manifest().DataBytes(), "elapsed_seconds": res.Elapsed.Seconds(),
			"peak_rss_bytes": peakRSS(),
		})
	}
	for _, warn := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", warn)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "exported %s to %s (%s): %s rows, %s in %d file(s), in %s (snapshot data: %s)\n",
		src, res.Path, res.Format, units.Count(res.Rows), units.Bytes(res.Bytes), len(res.Files),
		units.Duration(res.Elapsed), units.Bytes(s.Manifest().DataBytes()))
	names := make([]string, 0, len(res.StateRows))
	for n := range res.StateRows {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-28s %s rows\n", n, units.Count(res.StateRows[n]))
	}
	if res.WorkerStateFile != "" {
		fmt.Fprintf(w, "per-worker state: %s (%d items)\n", res.WorkerStateFile, res.WorkerStateItems)
	}
	return nil
}

// exportWarnings says why an export selected no rows: a worker that owns
// no bucket at its width, or a filter that matches nothing.
func exportWarnings(o *exportOptions, m *snapshotfmt.Manifest, rows uint64) []string {
	warnings := []string{}
	if rows > 0 || m.TotalEntries() == 0 {
		return warnings
	}
	n := int(m.Partitioning.Buckets)
	if o.worker != "" {
		if i, w, err := parseWorker(o.worker); err == nil && w > n {
			if _, _, ok := snapshotfmt.WorkerRange(i, w, n); !ok {
				return append(warnings, fmt.Sprintf("0 rows written: worker %d of %d owns no bucket (the snapshot has %d buckets, so at most %d workers own state); `rebucket plan --widths %d` shows which workers own buckets", i, w, n, n, w))
			}
		}
	}
	return append(warnings, fmt.Sprintf("0 rows written: the selection (%s) matches none of the snapshot's %s entries", exportSelection(o), units.Count(m.TotalEntries())))
}

func exportSelection(o *exportOptions) string {
	var parts []string
	if len(o.states) > 0 {
		parts = append(parts, "--state "+strings.Join(o.states, ", "))
	}
	if o.bucketRange != "" {
		parts = append(parts, "--bucket-range "+o.bucketRange)
	}
	if o.worker != "" {
		parts = append(parts, "--worker "+o.worker)
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, ", ")
}
