package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/engine/spark/sparkexport"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// runSparkExport exports a checkpoint's state rows. Parquet and Arrow go to
// a directory with one typed table per operator and store (their schemas
// differ); JSON Lines to one file, each row with operator, store,
// partition, the key and value decoded by the state schema, and their
// UnsafeRow bytes.
func runSparkExport(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "bucket-range", "worker", "partition-by", "state", "parallelism"); err != nil {
		return err
	}
	formatFlag, _ := cmd.Flags().GetString("format")
	out, _ := cmd.Flags().GetString("out")
	force, _ := cmd.Flags().GetBool("force")
	if out == "-" {
		return usagef(fmt.Errorf("--out -: export does not write to standard output (it publishes its output atomically by rename); give a name, e.g. --out state (a directory of Parquet tables) or --out rows.jsonl"))
	}
	format, known := dataset.FormatOfPath(out)
	if !known {
		format = dataset.Parquet
	}
	if cmd.Flags().Changed("format") {
		f, err := dataset.ParseFormat(formatFlag)
		if err != nil {
			return usagef(err)
		}
		if known && f != format {
			return usagef(fmt.Errorf("--format %s but --out %s has the extension of %s: drop --format, or rename --out", f, out, format))
		}
		format = f
	}
	if format == dataset.JSONL {
		if err := refuseFlags(cmd, "Spark checkpoint's JSON Lines export", "row-group-size", "batch-rows", "compression"); err != nil {
			return err
		}
	}
	c, err := spark.Open(args[0])
	if err != nil {
		return err
	}
	if format == dataset.JSONL {
		if err := flinkOutputAllowed(c.Dir, out, force); err != nil {
			return err
		}
		return sparkExportJSONL(cmd, g, c, args[0], out)
	}
	if err := sparkExportDirAllowed(c.Dir, out, force); err != nil {
		return err
	}
	comp, _ := cmd.Flags().GetString("compression")
	rowGroup, _ := cmd.Flags().GetInt("row-group-size")
	batch, _ := cmd.Flags().GetInt("batch-rows")
	if rowGroup < 1 || batch < 1 {
		return usagef(fmt.Errorf("--row-group-size and --batch-rows must be at least 1"))
	}
	// The directory is built in a run directory beside its final name,
	// locked for this run's life: a run killed before it published leaves
	// one that the next export to the same name removes.
	parent := filepath.Dir(out)
	prefix := "." + filepath.Base(out) + ".rebucket-tmp-"
	fsx.RemoveStale(nil, parent, prefix)
	runDir, err := fsx.MkdirRun(nil, parent, prefix, fsx.DirPerm)
	if err != nil {
		return fmt.Errorf("create a temporary directory beside %s: %w", out, err)
	}
	defer runDir.Remove()
	tmp := filepath.Join(runDir.Path, "export")
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return err
	}
	res, err := sparkexport.Export(cmd.Context(), c, tmp, sparkexport.Options{
		Format: sparkexport.Format(format), Compression: comp, RowGroupRows: rowGroup, BatchRows: batch,
		Progress: newProgress(cmd, g),
	})
	if errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		return usagef(err)
	}
	if err != nil {
		return err
	}
	if err := fsx.SyncDir(fsx.Or(nil), tmp); err != nil {
		return err
	}
	if _, err := os.Lstat(out); err == nil {
		// --force, checked above: the earlier export goes into the run
		// directory (removed with it) and the new one takes its name.
		if err := os.Rename(out, filepath.Join(runDir.Path, "replaced")); err != nil {
			return fmt.Errorf("move the earlier export %s aside: %w", out, err)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("publish %s: %w", out, err)
	}
	_ = fsx.SyncDir(fsx.Or(nil), parent)
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"engine": engineSpark, "checkpoint": args[0], "out": out,
			"format": format, "rows": res.Rows, "files": res.Files})
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "exported %s rows of Spark checkpoint %s to %s (%s, one table per operator and store):\n",
		units.Count(res.Rows), args[0], out, format)
	for _, f := range res.Files {
		fmt.Fprintf(w, "  %-40s %12s rows  key %s  value %s\n", f.Name, units.Count(f.Rows), orRaw(f.KeySchema), orRaw(f.ValueSchema))
	}
	return nil
}

func orRaw(schema string) string {
	if schema == "" {
		return "(UnsafeRow bytes)"
	}
	return schema
}

// sparkExportDirAllowed refuses an output inside the checkpoint, and one
// that exists unless --force and it is a directory an earlier Spark export
// wrote (it holds the export manifest): --force never replaces anything else.
func sparkExportDirAllowed(ckpt, out string, force bool) error {
	if err := refuseOverlap([]string{out}, nil, ckpt); err != nil {
		return err
	}
	fi, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !force:
		return fmt.Errorf("%w: %s exists; choose another --out, or --force to replace an earlier export", snapshotfmt.ErrRefused, out)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory; a Spark checkpoint exports to a directory of tables, and --force replaces only an earlier export", snapshotfmt.ErrRefused, out)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == sparkexport.ManifestName && e.Type().IsRegular() {
			return nil
		}
	}
	return fmt.Errorf("%w: %s holds no %s, so no Spark export wrote it; --force replaces only an earlier export", snapshotfmt.ErrRefused, out, sparkexport.ManifestName)
}

// sparkExportJSONL writes one JSON object per state row: operator,
// operator_name, store, partition, key and value decoded by the state
// schema (hex bytes when it cannot decode), key_base64 and value_base64.
func sparkExportJSONL(cmd *cobra.Command, g *globalOptions, c *spark.Checkpoint, src, out string) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".rebucket-export-*")
	if err != nil {
		return fmt.Errorf("create the output beside %s: %w", out, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	enc := json.NewEncoder(bw)
	var rows uint64
	err = c.ForEachRow(cmd.Context(), func(r spark.Row) error {
		rows++
		return enc.Encode(map[string]any{
			"operator": r.Operator.ID, "operator_name": r.Operator.Name, "store": r.Store.Name, "partition": r.Partition,
			"key": decodedJSON(r.Store.KeySchema, r.Key), "value": decodedJSON(r.Store.ValueSchema, r.Value),
			"key_base64": r.Key, "value_base64": r.Value,
		})
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o640)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return err
	}
	done = true
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"engine": engineSpark, "checkpoint": src, "out": out, "format": "jsonl", "rows": rows})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "exported %s rows of Spark checkpoint %s to %s (jsonl)\n", units.Count(rows), src, out)
	return nil
}
