package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/engine/flink"
	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The kinds of input every snapshot command accepts (DESIGN section 10):
// the commands detect them and --engine forces one.
const (
	engineAuto   = "auto"
	engineNative = "native"
	engineFlink  = "flink"
	engineSpark  = "spark"
)

// engineHandler runs a command on an engine's snapshot; args are the
// command's positional arguments, its flags are read from cmd.
type engineHandler func(cmd *cobra.Command, g *globalOptions, args []string) error

// flinkHandlers are the commands that speak Flink savepoints.
var flinkHandlers = map[string]engineHandler{
	"inspect": runFlinkInspect,
	"verify":  runFlinkVerify,
	"rewrite": runFlinkRewrite,
	"plan":    runFlinkPlan,
	"locate":  runFlinkLocate,
	"export":  runFlinkExport,
	// generate reads no snapshot: --engine flink asks for a savepoint.
	"generate": runFlinkGenerate,
}

// sparkHandlers are the commands that speak Spark checkpoints.
var sparkHandlers = map[string]engineHandler{
	"inspect":  runSparkInspect,
	"verify":   runSparkVerify,
	"rewrite":  runSparkRewrite,
	"plan":     runSparkPlan,
	"locate":   runSparkLocate,
	"export":   runSparkExport,
	"generate": runSparkGenerate,
}

// detectEngine tells which kind of snapshot path is: forced by --engine,
// else a Flink savepoint by its _metadata magic, else the native format.
func detectEngine(path, forced string) (string, error) {
	switch forced {
	case "", engineAuto:
	case engineNative:
		return engineNative, nil
	case engineFlink:
		if !flink.IsSavepoint(path) {
			return "", fmt.Errorf("%w: --engine flink: %s is not a Flink savepoint (no _metadata with Flink's magic number); give the savepoint directory or its _metadata file",
				snapshotfmt.ErrInvalidArgument, path)
		}
		return engineFlink, nil
	case engineSpark:
		if !spark.IsCheckpoint(path) {
			return "", fmt.Errorf("%w: --engine spark: %s is not a Spark checkpoint (no offsets/ and commits/ directories); give the query's checkpointLocation",
				snapshotfmt.ErrInvalidArgument, path)
		}
		return engineSpark, nil
	default:
		return "", usagef(fmt.Errorf("--engine %q: want auto, native, flink or spark", forced))
	}
	if _, err := os.Stat(filepath.Join(path, snapshotfmt.ManifestName)); err == nil {
		return engineNative, nil
	}
	if flink.IsSavepoint(path) {
		return engineFlink, nil
	}
	if spark.IsCheckpoint(path) {
		return engineSpark, nil
	}
	return engineNative, nil
}

// installEngines gives every command that reads a snapshot an --engine flag
// and routes an engine's snapshot to that engine's handler; the native
// commands stay as they are.
func installEngines(root *cobra.Command, g *globalOptions) {
	for _, c := range root.Commands() {
		handler, ok := flinkHandlers[c.Name()]
		if !ok || c.RunE == nil {
			continue
		}
		var forced string
		if c.Name() != "generate" {
			c.Flags().StringVar(&forced, "engine", engineAuto, "kind of input: auto (detect), native, flink or spark")
		}
		if c.Name() == "rewrite" {
			c.Flags().Bool("skip-uncommitted", false, "Spark: accept offsets newer than the last commit as Spark's own repartition does (marked committed; their input is not reprocessed into the state)")
		}
		if c.Name() == "locate" {
			c.Flags().String("key-type", "", "Flink: the key's type, e.g. string, long, int, tuple<string,long> (default: each keyed operator's own)")
		}
		native := c.RunE
		if c.Name() == "generate" {
			c.Flags().StringVar(&forced, "engine", engineNative, "what to write: native (a snapshot), flink (a canonical savepoint of the probe job) or spark (an HDFS-backed checkpoint of a count aggregation)")
			c.RunE = func(cmd *cobra.Command, args []string) error {
				switch forced {
				case engineNative, engineAuto:
					return native(cmd, args)
				case engineFlink:
					return handler(cmd, g, args)
				case engineSpark:
					return runSparkGenerate(cmd, g, args)
				}
				return usagef(fmt.Errorf("--engine %q: want native, flink or spark", forced))
			}
			continue
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return native(cmd, args)
			}
			kind, err := detectEngine(args[0], forced)
			if err != nil {
				return err
			}
			switch kind {
			case engineFlink:
				return handler(cmd, g, args)
			case engineSpark:
				return sparkHandlers[cmd.Name()](cmd, g, args)
			}
			if cmd.Flags().Changed("skip-uncommitted") {
				return usagef(fmt.Errorf("--skip-uncommitted applies to Spark checkpoints; %s is not one", args[0]))
			}
			if cmd.Flags().Changed("key-type") {
				return usagef(fmt.Errorf("--key-type applies to Flink savepoints; %s is a native snapshot (use --key-format)", args[0]))
			}
			return native(cmd, args)
		}
	}
}

// refuseFlags refuses flags that do not apply to an engine's snapshots.
func refuseFlags(cmd *cobra.Command, engine string, names ...string) error {
	for _, n := range names {
		if cmd.Flags().Lookup(n) != nil && cmd.Flags().Changed(n) {
			return usagef(fmt.Errorf("--%s does not apply to a %s savepoint", n, engine))
		}
	}
	return nil
}

// engineRewriteArgs are the rewrite flags an engine's rewrite takes.
type engineRewriteArgs struct {
	buckets, parallelism int
	out, tmp             string
	memory               int64
}

// parseEngineRewrite reads and checks them: the new count (what the engine
// calls it, at most maxBuckets), --out, --memory, --tmp and --parallelism;
// --force is refused (an engine's target is always new; its source is never
// replaced). It also installs the soft memory limit the native rewrite
// uses; the caller defers the returned restore.
func parseEngineRewrite(cmd *cobra.Command, engine, countName string, maxBuckets int) (engineRewriteArgs, func(), error) {
	var a engineRewriteArgs
	if force, _ := cmd.Flags().GetBool("force"); force {
		return a, nil, usagef(fmt.Errorf("--force is not supported for %s: give a new --out directory (the source is never replaced)", engine))
	}
	a.buckets, _ = cmd.Flags().GetInt("buckets")
	a.out, _ = cmd.Flags().GetString("out")
	a.tmp, _ = cmd.Flags().GetString("tmp")
	a.parallelism, _ = cmd.Flags().GetInt("parallelism")
	if a.buckets < 1 || a.buckets > maxBuckets {
		return a, nil, usagef(fmt.Errorf("--buckets %d: a %s is 1..%d", a.buckets, countName, maxBuckets))
	}
	if a.parallelism < 0 {
		return a, nil, usagef(fmt.Errorf("--parallelism %d: want at least 1", a.parallelism))
	}
	memFlag, _ := cmd.Flags().GetString("memory")
	var err error
	if a.memory, err = parseMemory(memFlag); err != nil {
		return a, nil, err
	}
	// As the native rewrite: the collector keeps the heap near the budget.
	old := debug.SetMemoryLimit(a.memory + plan.FixedOverhead/2)
	return a, func() { debug.SetMemoryLimit(old) }, nil
}

// reportEngineEqual ends verify --against of two engine snapshots: each
// difference as a finding, then the summary (--json), or the differences
// and the line (human); findings exit 1.
func reportEngineEqual(cmd *cobra.Command, g *globalOptions, sum any, equal bool, diffs []string, line string) error {
	w := cmd.OutOrStdout()
	if g.JSON {
		for _, d := range diffs {
			_ = writeJSONLine(w, map[string]string{"type": "finding", "kind": "differs", "severity": "error", "detail": d})
		}
		_ = writeSummaryLine(w, sum, nil)
	} else {
		for _, d := range diffs {
			fmt.Fprintln(w, d)
		}
		fmt.Fprintln(w, line)
	}
	if !equal {
		return silentError{ErrFindings}
	}
	return nil
}

// equalVerdict is the human verdict of an engine comparison.
func equalVerdict(equal bool, diffs int, what string) string {
	if equal {
		return "equal: " + what
	}
	return fmt.Sprintf("NOT equal: %d differences", diffs)
}
