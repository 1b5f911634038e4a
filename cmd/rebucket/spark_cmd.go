package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The Spark side of the snapshot commands (HDFS-backed checkpoints): parse
// what applies, call engine/spark, render. Flags that make no sense for a
// checkpoint are refused rather than ignored.

func sparkScanOptions(cmd *cobra.Command, g *globalOptions) spark.ScanOptions {
	o := spark.ScanOptions{Progress: newProgress(cmd, g)}
	for _, n := range []string{"parallelism", "parallel"} {
		if f := cmd.Flags().Lookup(n); f != nil {
			o.Parallelism, _ = cmd.Flags().GetInt(n)
			break
		}
	}
	return o
}

// sparkWidthLoad is a store's load when W tasks run its N partitions: task
// i runs the contiguous partitions the bucket-to-worker rule gives it (the
// spread is what matters: more than N tasks leave W-N without state).
type sparkWidthLoad struct {
	Operator string      `json:"operator"`
	Store    string      `json:"store"`
	Width    int         `json:"width"`
	Busiest  uint64      `json:"max_rows_per_task"`
	Idle     int         `json:"idle_tasks"`
	Tasks    []sparkTask `json:"tasks"`
}

type sparkTask struct {
	Task       int    `json:"task"`
	Partitions []int  `json:"partitions"`
	Rows       uint64 `json:"rows"`
	Bytes      uint64 `json:"bytes"`
}

func sparkLoadAt(op spark.OperatorReport, s spark.StoreReport, w int) sparkWidthLoad {
	n := len(s.Partitions)
	l := sparkWidthLoad{Operator: fmt.Sprintf("%d (%s)", op.ID, op.Name), Store: s.Name, Width: w}
	for i := 0; i < w; i++ {
		t := sparkTask{Task: i, Partitions: []int{}}
		lo, hi, ok := snapshotfmt.WorkerRange(i, w, max(n, 1))
		if ok {
			for p := lo; p <= hi && p < n; p++ {
				t.Partitions = append(t.Partitions, p)
				t.Rows += s.Partitions[p].Rows
				t.Bytes += s.Partitions[p].Bytes
			}
		}
		if len(t.Partitions) == 0 {
			l.Idle++
		}
		l.Busiest = max(l.Busiest, t.Rows)
		l.Tasks = append(l.Tasks, t)
	}
	return l
}

func renderSparkStores(w io.Writer, rep *spark.Report) {
	for _, op := range rep.Operators {
		fmt.Fprintf(w, "operator %d: %s", op.ID, op.Name)
		if op.Inferred {
			fmt.Fprint(w, " (no operator metadata: kind inferred from the layout)")
		}
		fmt.Fprintln(w)
		if op.Unsupported != "" {
			fmt.Fprintf(w, "  NOT rewritable: %s\n", op.Unsupported)
		}
		for _, s := range op.Stores {
			fmt.Fprintf(w, "  store %s: %s rows, %s; key %s, value %s", s.Name, units.Count(s.Rows), units.Bytes(int64(s.Bytes)), s.KeySchema, s.ValueSchema)
			if len(s.PartitionBy) > 0 {
				fmt.Fprintf(w, "; partitioned by %s", strings.Join(s.PartitionBy, ", "))
			}
			fmt.Fprintln(w)
			rows := make([]barRow, 0, len(s.Partitions))
			for p, pl := range s.Partitions {
				note := fmt.Sprintf("%s rows  %s in %d files", units.Count(pl.Rows), units.Bytes(pl.FileBytes), pl.Files)
				if pl.Missing {
					note = "MISSING"
				}
				rows = append(rows, barRow{label: fmt.Sprintf("partition %d", p), value: float64(pl.Rows), note: note})
			}
			if len(rows) <= 16 {
				drawBars(w, rows, 24)
			}
		}
	}
}

type sparkInspectReport struct {
	Engine string `json:"engine"`
	*spark.Report
}

func runSparkInspect(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "top-keys"); err != nil {
		return err
	}
	rep, err := spark.Inspect(cmd.Context(), args[0], sparkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), sparkInspectReport{Engine: engineSpark, Report: rep})
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Spark checkpoint %s\n  query %s, last committed batch %d (state version %d)", rep.Path, rep.QueryID, rep.LastCommitted, rep.StateVersion)
	if len(rep.Uncommitted) > 0 {
		fmt.Fprintf(w, ", UNCOMMITTED batches %s", plan.CompactInts(int64sToInts(rep.Uncommitted)))
	}
	fmt.Fprintf(w, "\n  %d state partitions (the bucket count), provider %s, codec %s, encoding %s, offset log v%d; %s rows\n",
		rep.Partitions, shortProvider(rep.Provider), rep.Codec, rep.Encoding, rep.OffsetLog, units.Count(rep.Rows))
	renderSparkStores(w, rep)
	return nil
}

func int64sToInts(xs []int64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

func shortProvider(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[i+1:]
	}
	return p
}

type sparkVerifySummary struct {
	Engine         string           `json:"engine"`
	Checkpoint     string           `json:"checkpoint"`
	Partitions     int              `json:"partitions"`
	Rows           uint64           `json:"rows"`
	Errors         int              `json:"errors"`
	Width          int              `json:"width,omitempty"`
	Loads          []sparkWidthLoad `json:"loads,omitempty"`
	ElapsedSeconds float64          `json:"elapsed_seconds"`
}

type sparkFindingLine struct {
	Type string `json:"type"`
	spark.Finding
}

func runSparkVerify(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "deep"); err != nil {
		return err
	}
	if against, _ := cmd.Flags().GetString("against"); against != "" {
		return runSparkVerifyAgainst(cmd, g, args[0], against)
	}
	width, _ := cmd.Flags().GetInt("width")
	if cmd.Flags().Changed("width") && width < 1 {
		return usagef(fmt.Errorf("--width %d: want at least 1", width))
	}
	start := time.Now()
	rep, err := spark.Verify(cmd.Context(), args[0], sparkScanOptions(cmd, g))
	w := cmd.OutOrStdout()
	if err != nil {
		if cmd.Context().Err() == nil && g.JSON {
			_ = writeSummaryLine(w, sparkVerifySummary{Engine: engineSpark, Checkpoint: args[0]}, err)
			return silentError{err}
		}
		return err
	}
	sum := sparkVerifySummary{Engine: engineSpark, Checkpoint: args[0], Partitions: rep.Partitions, Rows: rep.Rows, Errors: rep.FindingsTotal, Width: width}
	for _, f := range rep.Findings {
		if g.JSON {
			_ = writeJSONLine(w, sparkFindingLine{"finding", f})
		} else {
			fmt.Fprintln(w, f.String())
		}
	}
	if width > 0 {
		for _, op := range rep.Operators {
			for _, s := range op.Stores {
				sum.Loads = append(sum.Loads, sparkLoadAt(op, s, width))
			}
		}
	}
	sum.ElapsedSeconds = time.Since(start).Seconds()
	if g.JSON {
		_ = writeSummaryLine(w, sum, nil)
	} else {
		fmt.Fprintf(w, "Spark checkpoint %s: %d partitions, %s rows at state version %d read, every key rehashed: %d findings (%s)\n",
			args[0], rep.Partitions, units.Count(rep.Rows), rep.StateVersion, rep.FindingsTotal, units.Duration(time.Since(start)))
		if width > rep.Partitions {
			m := plan.SuggestBuckets(rep.Partitions, width)
			fmt.Fprintf(w, "at %d tasks, %d would hold no state: the query runs %d state store instances; to spread it, rebucket rewrite %s --buckets %d --out %s\n",
				width, width-rep.Partitions, rep.Partitions, plan.ShellQuote(args[0]), m, plan.ShellQuote(plan.SuggestTarget(args[0], m)))
		}
	}
	if rep.FindingsTotal > 0 {
		return silentError{ErrFindings}
	}
	return nil
}

type sparkEqualSummary struct {
	Engine string `json:"engine"`
	Target string `json:"target"`
	Source string `json:"source"`
	*spark.EqualReport
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

func runSparkVerifyAgainst(cmd *cobra.Command, g *globalOptions, target, source string) error {
	if err := refuseFlags(cmd, "Spark", "width"); err != nil {
		return err
	}
	if !spark.IsCheckpoint(source) {
		return usagef(fmt.Errorf("--against %s: not a Spark checkpoint; a checkpoint is compared with a checkpoint", source))
	}
	start := time.Now()
	rep, err := spark.Equal(cmd.Context(), target, source, sparkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	if rep.Differences == nil {
		rep.Differences = []string{}
	}
	sum := sparkEqualSummary{Engine: engineSpark, Target: target, Source: source, EqualReport: rep, ElapsedSeconds: time.Since(start).Seconds()}
	return reportEngineEqual(cmd, g, sum, rep.Equal, rep.Differences, fmt.Sprintf("TARGET %s (%s rows) against SOURCE %s (%s rows): %s (%s)",
		target, units.Count(rep.RowsA), source, units.Count(rep.RowsB),
		equalVerdict(rep.Equal, len(rep.Differences), "the same rows per operator and store"), units.Duration(time.Since(start))))
}

type sparkRewriteReport struct {
	Engine string `json:"engine"`
	*spark.RewriteResult
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
}

func runSparkRewrite(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "mapping", "file-size", "compression", "note", "drop-state", "rename-state", "no-verify", "tmp"); err != nil {
		return err
	}
	a, restore, err := parseEngineRewrite(cmd, "Spark checkpoints", "Spark state partition count", snapshotfmt.MaxBuckets)
	if err != nil {
		return err
	}
	defer restore()
	skip, _ := cmd.Flags().GetBool("skip-uncommitted")
	if err := refuseOverlap([]string{a.out}, nil, args[0]); err != nil {
		return err
	}
	start := time.Now()
	res, err := spark.Rewrite(cmd.Context(), args[0], a.out, spark.RewriteOptions{
		Partitions: a.buckets, SkipUncommitted: skip, Memory: a.memory, Parallelism: a.parallelism, Progress: newProgress(cmd, g),
	})
	if err != nil {
		return err
	}
	rep := sparkRewriteReport{Engine: engineSpark, RewriteResult: res, ElapsedSeconds: time.Since(start).Seconds(), PeakRSS: peakRSS()}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Spark checkpoint %s: %d -> %d state partitions, %s rows re-partitioned (last committed batch %d; new batch %d, state version %d)\n",
		res.Source, res.FromPartitions, res.Partitions, units.Count(res.Rows), res.LastCommitted, res.NewBatch, res.StateVersion)
	if len(res.Skipped) > 0 {
		fmt.Fprintf(w, "  skipped uncommitted batches %s (marked committed; their input is not in the state)\n", plan.CompactInts(int64sToInts(res.Skipped)))
	}
	for _, op := range res.Operators {
		fmt.Fprintf(w, "  operator %d %s (stores %s): %s rows, %s written\n", op.ID, op.Name, strings.Join(op.Stores, ", "), units.Count(op.Rows), units.Bytes(op.Bytes))
	}
	if res.Verified {
		fmt.Fprintln(w, "  proved before publishing: every row in the partition its key hashes to, the same rows per operator and store as the source")
	}
	fmt.Fprintf(w, "wrote %s in %s; restart the query with checkpointLocation=%s (the partition count comes from the checkpoint)\n",
		res.Target, units.Duration(time.Since(start)), res.Target)
	return nil
}

type sparkPlanReport struct {
	Engine     string           `json:"engine"`
	Checkpoint string           `json:"checkpoint"`
	Partitions int              `json:"partitions"`
	Loads      []sparkWidthLoad `json:"loads"`
	Advice     string           `json:"advice,omitempty"`
}

func runSparkPlan(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "mapping", "memory", "top-keys", "buckets"); err != nil {
		return err
	}
	widths, _ := cmd.Flags().GetIntSlice("widths")
	rep, err := spark.Inspect(cmd.Context(), args[0], sparkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	doc := sparkPlanReport{Engine: engineSpark, Checkpoint: args[0], Partitions: rep.Partitions, Loads: []sparkWidthLoad{}}
	peak := 0
	for _, wd := range widths {
		if wd < 1 {
			return usagef(fmt.Errorf("--widths: %d is not a width", wd))
		}
		peak = max(peak, wd)
		for _, op := range rep.Operators {
			for _, s := range op.Stores {
				doc.Loads = append(doc.Loads, sparkLoadAt(op, s, wd))
			}
		}
	}
	if peak > rep.Partitions {
		m := plan.SuggestBuckets(rep.Partitions, peak)
		doc.Advice = fmt.Sprintf("rebucket rewrite %s --buckets %d --out %s", plan.ShellQuote(args[0]), m, plan.ShellQuote(plan.SuggestTarget(args[0], m)))
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Spark checkpoint %s: %d state partitions (at most %d tasks hold state)\n", args[0], rep.Partitions, rep.Partitions)
	for _, l := range doc.Loads {
		fmt.Fprintf(w, "width %d, operator %s store %s: busiest task %s rows, %d tasks without state\n", l.Width, l.Operator, l.Store, units.Count(l.Busiest), l.Idle)
	}
	if doc.Advice != "" {
		fmt.Fprintf(w, "to spread state over %d tasks: %s\n", peak, doc.Advice)
	}
	return nil
}

type sparkLocateReport struct {
	Engine     string          `json:"engine"`
	Checkpoint string          `json:"checkpoint"`
	Key        string          `json:"key"`
	Stores     []sparkLocStore `json:"stores"`
}

type sparkLocStore struct {
	Operator  int               `json:"operator"`
	Store     string            `json:"store"`
	Partition int               `json:"partition"`
	Of        int               `json:"partitions"`
	Rows      []json.RawMessage `json:"rows"`
}

// runSparkLocate takes KEY as COL=VALUE[,COL=VALUE...] over the partition
// key columns of the stores.
func runSparkLocate(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "key-format", "key-type"); err != nil {
		return err
	}
	vals := map[string]string{}
	for _, kv := range strings.Split(args[1], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef(fmt.Errorf("key %q: give the partition key columns as COL=VALUE[,COL=VALUE...]", args[1]))
		}
		vals[strings.TrimSpace(k)] = v
	}
	c, err := spark.Open(args[0])
	if err != nil {
		return err
	}
	rep := sparkLocateReport{Engine: engineSpark, Checkpoint: args[0], Key: args[1], Stores: []sparkLocStore{}}
	idx := map[*spark.Store]int{}
	targets := map[*spark.Store][]byte{}
	for _, op := range c.Operators {
		for _, s := range op.Stores {
			kb, kt, err := spark.EncodeKey(s, vals)
			if err != nil {
				continue
			}
			p, err := spark.PartitionOf(&spark.Store{KeySchema: kt, KeyCols: seq(len(kt.Fields))}, kb, c.Partitions)
			if err != nil {
				return err
			}
			idx[s] = len(rep.Stores)
			targets[s] = kb
			rep.Stores = append(rep.Stores, sparkLocStore{Operator: op.ID, Store: s.Name, Partition: p, Of: c.Partitions, Rows: []json.RawMessage{}})
		}
	}
	if len(rep.Stores) == 0 {
		return fmt.Errorf("%w: key %q names no store's partition key columns completely; see inspect for each store's key", snapshotfmt.ErrInvalidArgument, args[1])
	}
	err = c.ForEachRow(cmd.Context(), func(r spark.Row) error {
		i, ok := idx[r.Store]
		if !ok || r.Partition != rep.Stores[i].Partition {
			return nil
		}
		if t := r.Store.TWS; t != nil {
			return locateTWSRow(t, r, targets[r.Store], c.MergeDelimiter(), &rep.Stores[i])
		}
		k, err := unsaferow.Decode(r.Store.KeySchema, r.Key)
		if err != nil {
			return err
		}
		match := true
		for j, col := range r.Store.KeyCols {
			f := r.Store.KeySchema.Fields[col]
			if fmt.Sprint(jsonValue(f.Type, k[col])) != fmt.Sprint(jsonValue(f.Type, mustDecodeSub(targets[r.Store], r.Store, j))) {
				match = false
				break
			}
		}
		if !match {
			return nil
		}
		b, _ := json.Marshal(map[string]any{"key": rowJSON(r.Store.KeySchema, k), "value": decodedJSON(r.Store.ValueSchema, r.Value)})
		rep.Stores[i].Rows = append(rep.Stores[i].Rows, b)
		return nil
	})
	if err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	w := cmd.OutOrStdout()
	for _, s := range rep.Stores {
		fmt.Fprintf(w, "operator %d store %s: key %s is in partition %d of %d; %d rows\n", s.Operator, s.Store, args[1], s.Partition, s.Of, len(s.Rows))
		for _, r := range s.Rows {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	return nil
}

// locateTWSRow adds a row of a transformWithState store whose grouping key
// is target: its column family, grouping key and value rows (a list's
// elements).
func locateTWSRow(t *spark.TWS, r spark.Row, target []byte, delim int, out *sparkLocStore) error {
	cf, g, null, err := t.GroupingKey(r.Key)
	if err != nil {
		return err
	}
	if null || !bytes.Equal(g.Bytes(), target) {
		return nil
	}
	vals, err := t.Values(cf, r.Value, delim)
	if err != nil {
		return fmt.Errorf("column family %s: %w", cf.Name, err)
	}
	dec := make([]any, 0, len(vals))
	for _, v := range vals {
		dec = append(dec, decodedJSON(cf.ValueSchema, v))
	}
	b, _ := json.Marshal(map[string]any{"family": cf.Name, "key": decodedJSON(t.Grouping, g.Bytes()), "values": dec})
	out.Rows = append(out.Rows, b)
	return nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// mustDecodeSub decodes field j of the partition-key row EncodeKey built.
func mustDecodeSub(b []byte, s *spark.Store, j int) any {
	sub := &unsaferow.Type{Kind: unsaferow.Struct}
	for _, c := range s.KeyCols {
		sub.Fields = append(sub.Fields, s.KeySchema.Fields[c])
	}
	v, err := unsaferow.Decode(sub, b)
	if err != nil || j >= len(v) {
		return nil
	}
	return v[j]
}

// jsonValue turns a decoded UnsafeRow value into what JSON shows: dates as
// YYYY-MM-DD, timestamps in RFC 3339, decimals as strings, NaN and
// infinities as strings, structs as objects.
func jsonValue(t *unsaferow.Type, v any) any {
	if v == nil {
		return nil
	}
	switch t.Kind {
	case unsaferow.Date:
		return time.Unix(int64(v.(int32))*86400, 0).UTC().Format("2006-01-02")
	case unsaferow.Timestamp, unsaferow.TimestampNTZ:
		return time.UnixMicro(v.(int64)).UTC().Format(time.RFC3339Nano)
	case unsaferow.Decimal:
		return fmt.Sprint(v)
	case unsaferow.Float, unsaferow.Double:
		f := 0.0
		switch x := v.(type) {
		case float32:
			f = float64(x)
		case float64:
			f = x
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f)
		}
		return f
	case unsaferow.Struct:
		return rowJSON(t, v.([]any))
	}
	return v
}

func rowJSON(t *unsaferow.Type, vals []any) map[string]any {
	out := make(map[string]any, len(t.Fields))
	for i, f := range t.Fields {
		if i < len(vals) {
			out[f.Name] = jsonValue(f.Type, vals[i])
		}
	}
	return out
}

func decodedJSON(t *unsaferow.Type, b []byte) any {
	if t == nil {
		return hex.EncodeToString(b)
	}
	v, err := unsaferow.Decode(t, b)
	if err != nil {
		return hex.EncodeToString(b)
	}
	return rowJSON(t, v)
}

// runSparkGenerate writes an HDFS-backed checkpoint of a string-keyed count
// aggregation (for benchmarks and trials).
func runSparkGenerate(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Spark", "mapping", "sub-keys", "list-len", "value-size", "spread", "skew", "seed",
		"no-worker-state", "file-size", "compression", "force", "width"); err != nil {
		return err
	}
	out, _ := cmd.Flags().GetString("out")
	keys, _ := cmd.Flags().GetInt("keys")
	entries, _ := cmd.Flags().GetInt("entries")
	buckets, _ := cmd.Flags().GetInt("buckets")
	if keys == 0 {
		keys = 1000
		if entries > 0 {
			keys = entries
		}
	}
	start := time.Now()
	if err := spark.Generate(out, spark.GenerateOptions{Keys: keys, Partitions: buckets}); err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"engine": engineSpark, "out": out, "keys": keys, "partitions": buckets, "elapsed_seconds": time.Since(start).Seconds()})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote an HDFS-backed Spark checkpoint of a count aggregation to %s: %s keys in %d partitions (%s)\n",
		out, units.Count(uint64(keys)), buckets, units.Duration(time.Since(start)))
	return nil
}
