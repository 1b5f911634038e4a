package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func init() { registerCommand(newImportCommand) }

type importOptions struct {
	buckets, width                                int
	mapping, out, dedupe, statesFile, workerState string
	like, step, state                             string
	noWorkerState, dryRun                         bool
	memory, tmpDir, fileSize, compression         string
	force, noVerify                               bool
}

func newImportCommand(g *globalOptions) *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import DATASET --buckets M --out SNAPSHOT [flags]",
		Short: "Build a snapshot of any bucket count from a Parquet or Arrow IPC dataset",
		Long: `import reads a dataset with the export's schema (a Parquet file, an Arrow IPC
file or stream, or a directory of them, Hive-partitioned or not) and writes a complete
snapshot with M buckets: the route to rebuild state from a dataset, or to
bootstrap a snapshot from data produced elsewhere.

Columns: step and state (string; may come from step=/state= directories
instead), key and value (binary), sub_key (binary, null unless map state;
optional). Other columns (bucket, decoded columns) are ignored: every key is
hashed into its bucket of the new layout. The schema of every file is checked
first and every missing or mistyped column named.

The states table and per-worker state come from the export's metadata when
present. A dataset without it (made elsewhere, or rewritten by a tool such
as DuckDB's COPY, which drops Parquet key-value metadata) is refused unless
you say where they come from: --like SNAPSHOT takes states, kinds, codecs,
width and per-worker state from an existing snapshot; or --states FILE (the
"states" array of 'rebucket inspect --json SNAPSHOT', or a JSON array of
{step, name, kind, key_codec, sub_key_codec, value_codec}) with either
--worker-state TABLE (step, name, rule, worker, item, value) or an explicit
--no-worker-state. Guessing dropped a job's source offsets silently.
A plain table may have VARCHAR or BIGINT key, sub_key and value columns
(encoded by the state's codec: text as is, BIGINT as int64 big-endian, which
needs the int64 codec), and no step/state columns when --step and --state
name the one state all its rows belong to.

Every row a file declares (a Parquet footer's row groups, an Arrow file's
record batches) is read or the import fails, naming the file and row group;
a whole export's rows must add up to the entries of the source manifest its
metadata carries. In a dataset directory a symbolic link is followed only
to a file inside the directory; a FIFO, device or link out is refused, as
is a per-worker state file the metadata names outside the dataset. The
summary states the rows declared and read.

Rows with the same (step, state, key, sub-key) are an error unless --dedupe
first|last (the summary says how many were dropped). The input may be larger than memory: it is sorted within
--memory, spilling to --tmp. Peak resident memory is --memory plus a fixed
overhead of under 100 MiB whatever the input size (measured: 67-76 MiB at
--memory 32MiB, 51-91 MiB for 10M rows at --memory 256MiB), plus one input
page or Arrow record batch. The written snapshot is read back and its
fingerprints compared with what was written (--no-verify skips that).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.buckets, "buckets", 0, "bucket count M of the new snapshot (1..65536)")
	_ = cmd.MarkFlagRequired("buckets")
	f.StringVar(&o.mapping, "mapping", "mod", "bucket mapping: mod or range")
	f.IntVar(&o.width, "width", 0, "width at write of the new snapshot (default: the export's, capped at M; else 1)")
	f.StringVar(&o.out, "out", "", "directory of the new snapshot (must not exist, or be empty)")
	_ = cmd.MarkFlagRequired("out")
	f.StringVar(&o.dedupe, "dedupe", "", "keep the first or last of duplicate rows instead of failing")
	f.StringVar(&o.statesFile, "states", "", "JSON file with the states table (for a dataset without export metadata)")
	f.StringVar(&o.workerState, "worker-state", "", "per-worker state table to import (default: the one the export names)")
	f.BoolVar(&o.noWorkerState, "no-worker-state", false, "import no per-worker state (say so for a dataset without export metadata)")
	f.StringVar(&o.step, "step", "", "the step of every row, for a table without a step column")
	f.StringVar(&o.state, "state", "", "the state name of every row, for a table without a state column")
	f.StringVar(&o.like, "like", "", "take states, kinds, codecs, width and per-worker state from this existing snapshot")
	f.StringVar(&o.memory, "memory", "", memoryFlagHelp)
	f.StringVar(&o.tmpDir, "tmp", "", "directory for spill files (default: beside --out)")
	f.StringVar(&o.fileSize, "file-size", "128MiB", "target data file size")
	f.StringVar(&o.compression, "compression", "snappy", "data file compression: snappy, zstd or none")
	f.BoolVar(&o.force, "force", false, "replace a non-empty --out once the new snapshot is complete")
	f.BoolVar(&o.noVerify, "no-verify", false, "skip reading the written snapshot back")
	f.BoolVar(&o.dryRun, "dry-run", false, "run the checks and print the plan, write nothing: exit 0 when the import would start, else the refusal's code")
	return cmd
}

// maxStatesFile bounds a --states file (a manifest is bounded alike).
const maxStatesFile = snapshotfmt.MaxManifestSize

// importReport is the --json document: the import's result plus the
// process's peak resident memory (0 where the system does not say).
type importReport struct {
	*dataset.ImportResult
	PeakRSS int64 `json:"peak_rss_bytes"`
}

func runImport(cmd *cobra.Command, g *globalOptions, o *importOptions, src string) error {
	mapping, err := snapshotfmt.ParseMapping(o.mapping)
	if err != nil {
		return usagef(err)
	}
	if o.buckets < snapshotfmt.MinBuckets || o.buckets > snapshotfmt.MaxBuckets {
		return usagef(fmt.Errorf("--buckets %d: want %d..%d", o.buckets, snapshotfmt.MinBuckets, snapshotfmt.MaxBuckets))
	}
	if o.dedupe != "" && o.dedupe != "first" && o.dedupe != "last" {
		return usagef(fmt.Errorf("--dedupe %q: want first or last", o.dedupe))
	}
	mem, err := parseMemory(o.memory)
	if err != nil {
		return err
	}
	fs, err := units.ParseBytes(o.fileSize)
	if err != nil {
		return usagef(fmt.Errorf("--file-size: %w", err))
	}
	if err := checkFileSizeFlag(fs, ""); err != nil {
		return err
	}
	if o.buckets > snapshotfmt.WarnBuckets {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d buckets is above %d: every tool pays a per-bucket bookkeeping cost\n", o.buckets, snapshotfmt.WarnBuckets)
	}
	opts := dataset.ImportOptions{
		Buckets: o.buckets, Mapping: mapping, Width: o.width, Dedupe: o.dedupe,
		WorkerState: o.workerState, NoWorkerState: o.noWorkerState, Like: o.like, Step: o.step, State: o.state, DryRun: o.dryRun, Memory: mem, TmpDir: o.tmpDir, NoVerify: o.noVerify,
		Writer:   writer.Options{FileSize: fs, Force: o.force, Compression: o.compression},
		Progress: newProgress(cmd, g), Tool: toolName(),
	}
	if o.statesFile != "" {
		// A states table is a few KiB; the bound keeps a wrong path (a
		// large file, a FIFO, a device) from being read at all.
		data, err := fsx.ReadRegular(o.statesFile, maxStatesFile)
		if err != nil {
			return usagef(fmt.Errorf("--states: %w", err))
		}
		if opts.States, err = dataset.ParseStatesFile(data); err != nil {
			return usagef(fmt.Errorf("--states %s: %w", o.statesFile, err))
		}
	}
	// The sort's budget counts live entries; a soft limit makes the
	// collector reclaim dropped sort chunks and decoded pages before the
	// heap grows to twice the live size (which GOGC alone allows).
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(mem + plan.FixedOverhead/2))
	if err := refuseOverlap([]string{o.out}, []string{o.tmpDir}, src, o.statesFile, o.workerState, o.like); err != nil {
		return err
	}
	res, err := dataset.Import(cmd.Context(), src, o.out, opts)
	if o.dryRun {
		if err == nil && !g.JSON {
			printImportPlan(cmd, src, o.out, res)
		}
		return reportDryRun(cmd, g, "import", res, err)
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), importReport{ImportResult: res, PeakRSS: peakRSS()})
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "imported %s into %s: %s rows -> %s entries in %d files (%s), %d buckets (%s), width %d, in %s\n",
		src, res.Snapshot, units.Count(res.RowsRead), units.Count(res.Entries), res.Files, units.Bytes(res.DataBytes),
		res.Partitioning.Buckets, res.Partitioning.Mapping, res.Width, units.Duration(res.Elapsed))
	fmt.Fprintf(w, "rows: %s declared by %d input files, %s read\n", units.Count(res.RowsDeclared), len(res.Inputs), units.Count(res.RowsRead))
	if n := len(res.Ignored); n > 0 {
		fmt.Fprintf(w, "ignored (names starting with _ or .): %s", strings.Join(res.Ignored[:min(n, 5)], ", "))
		if n > 5 {
			fmt.Fprintf(w, " and %d more", n-5)
		}
		fmt.Fprintln(w)
	}
	if o.dedupe != "" {
		fmt.Fprintf(w, "duplicates: %s rows dropped (--dedupe %s)\n", units.Count(res.Duplicates), o.dedupe)
	}
	fmt.Fprintf(w, "states (%s):\n", res.StatesFrom)
	for _, s := range res.States {
		fmt.Fprintf(w, "  %-28s %-5s %s entries\n", s.QualifiedName(), s.Kind, units.Count(s.Entries))
	}
	if len(res.WorkerStates) > 0 {
		fmt.Fprintf(w, "per-worker state from %s: %s\n", res.WorkerSource, strings.Join(res.WorkerStates, ", "))
	}
	if res.Partial {
		fmt.Fprintln(w, "note: the dataset is a partial export (filtered by state, bucket range or worker, or a part of an export's directory)")
	}
	if res.Sort.Runs > 0 {
		fmt.Fprintf(w, "sort: %d runs spilled (%s)\n", res.Sort.Runs, units.Bytes(res.Sort.SpillBytes))
	}
	reportTempDirs(w, res.StaleRemoved, res.Leftover)
	if res.Verified {
		fmt.Fprintln(w, "verified: the written snapshot reads back with the fingerprints of the rows written")
	} else {
		fmt.Fprintln(w, "not verified (--no-verify)")
	}
	return nil
}

// printImportPlan is the human plan of import --dry-run.
func printImportPlan(cmd *cobra.Command, src, out string, res *dataset.ImportResult) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "plan: import %s into %s: %d input files", src, out, len(res.Inputs))
	if res.RowsDeclared > 0 {
		fmt.Fprintf(w, " declaring %s rows", units.Count(res.RowsDeclared))
	}
	fmt.Fprintf(w, ", %d buckets (%s), width %d\n", res.Partitioning.Buckets, res.Partitioning.Mapping, res.Width)
	fmt.Fprintf(w, "states (%s):\n", res.StatesFrom)
	for _, s := range res.States {
		fmt.Fprintf(w, "  %-28s %s\n", s.QualifiedName(), s.Kind)
	}
	if len(res.WorkerStates) > 0 {
		fmt.Fprintf(w, "per-worker state from %s: %s\n", res.WorkerSource, strings.Join(res.WorkerStates, ", "))
	} else {
		fmt.Fprintln(w, "per-worker state: none")
	}
}
