package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func init() { registerCommand(newGenerateCommand) }

type generateOptions struct {
	buckets, width, keys, entries int
	subKeys, listLen, valueSize   int
	mapping, skew, fileSize       string
	compression                   string
	spread, noWorkerState, force  bool
	seed                          uint64
}

func newGenerateCommand(g *globalOptions) *cobra.Command {
	o := &generateOptions{}
	cmd := &cobra.Command{
		Use:   "generate --out DIR [flags]",
		Short: "Write a deterministic, realistic sample snapshot",
		Long: `generate writes a snapshot as a job at --width workers would leave it: three
keyed states (a value, a map with several sub-keys per key, a list) and two
per-worker states (source offsets redistributed by split, a lookup table by
broadcast). The same flags give identical data files on every run.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, _ := cmd.Flags().GetString("out")
			return runGenerate(cmd, g, o, out)
		},
	}
	f := cmd.Flags()
	f.String("out", "", "directory to write the snapshot to (must not exist, or be empty)")
	_ = cmd.MarkFlagRequired("out")
	f.IntVar(&o.buckets, "buckets", 8, "bucket count N (1..65536)")
	f.IntVar(&o.width, "width", 4, "width (workers) of the job that wrote it")
	f.StringVar(&o.mapping, "mapping", "mod", "bucket mapping: mod or range")
	f.IntVar(&o.keys, "keys", 0, "distinct keys (default: from --entries, else 1000)")
	f.IntVar(&o.entries, "entries", 0, "approximate total entries (sets --keys)")
	f.IntVar(&o.subKeys, "sub-keys", 4, "mean map sub-keys per key")
	f.IntVar(&o.listLen, "list-len", 3, "mean list items per key")
	f.IntVar(&o.valueSize, "value-size", 32, "mean value size in bytes")
	f.BoolVar(&o.spread, "spread", false, "vary value sizes and counts around the means")
	f.StringVar(&o.skew, "skew", "uniform", "key skew: uniform or zipf")
	f.Uint64Var(&o.seed, "seed", 1, "random seed")
	f.BoolVar(&o.noWorkerState, "no-worker-state", false, "leave out per-worker state")
	f.StringVar(&o.fileSize, "file-size", "128MiB", "target data file size")
	f.StringVar(&o.compression, "compression", "snappy", compressionFlagHelp)
	f.BoolVar(&o.force, "force", false, "replace a non-empty --out once the new snapshot is complete")
	return cmd
}

func runGenerate(cmd *cobra.Command, g *globalOptions, o *generateOptions, out string) error {
	fs, err := units.ParseBytes(o.fileSize)
	if err != nil {
		return usagef(fmt.Errorf("--file-size: %w", err))
	}
	if err := checkFileSizeFlag(fs, ""); err != nil {
		return err
	}
	comp, err := parseCompression(o.compression)
	if err != nil {
		return err
	}
	mapping, err := snapshotfmt.ParseMapping(o.mapping)
	if err != nil {
		return usagef(err)
	}
	if o.skew != string(fixtures.Uniform) && o.skew != string(fixtures.Zipf) {
		return usagef(fmt.Errorf("--skew %q: want uniform or zipf", o.skew))
	}
	if o.width < 1 || o.subKeys < 1 || o.listLen < 1 || o.valueSize < 1 {
		return usagef(fmt.Errorf("--width, --sub-keys, --list-len and --value-size must be at least 1"))
	}
	if o.width > o.buckets {
		return usagef(fmt.Errorf("--width %d is above --buckets %d: a job cannot run more state-owning workers than buckets", o.width, o.buckets))
	}
	spec := fixtures.Spec{
		Buckets: o.buckets, Width: o.width, Mapping: mapping, Keys: o.keys,
		SubKeys: o.subKeys, ListLen: o.listLen, ValueSize: o.valueSize, ValueSpread: o.spread,
		Skew: fixtures.Skew(o.skew), Seed: o.seed, NoWorkerState: o.noWorkerState, Tool: toolName(),
	}
	if spec.Keys == 0 && o.entries > 0 {
		spec.Keys = spec.KeysFor(o.entries) // honours --entries under any --skew
	}
	start := time.Now()
	m, err := fixtures.Generate(cmd.Context(), out, spec, writer.Options{FileSize: fs, Force: o.force, Compression: comp})
	if err != nil {
		return err
	}
	el := time.Since(start)
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{
			"snapshot": out, "entries": m.TotalEntries(), "logical_bytes": m.TotalBytes(),
			"data_bytes": m.DataBytes(), "files": len(m.Files), "buckets": m.Partitioning.Buckets,
			"mapping": m.Partitioning.Mapping, "width": m.WidthAtWrite, "elapsed_seconds": el.Seconds(),
		})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "generated %s: %s entries, %s in %d files, %d buckets (%s), width %d, in %s\n",
		out, units.Count(m.TotalEntries()), units.Bytes(m.DataBytes()), len(m.Files),
		m.Partitioning.Buckets, m.Partitioning.Mapping, m.WidthAtWrite, units.Duration(el))
	return nil
}
