package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/engine/flink"
	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The Flink side of the snapshot commands: parse what applies, call
// engine/flink, render. Flags that make no sense for a savepoint are
// refused rather than ignored.

func flinkScanOptions(cmd *cobra.Command, g *globalOptions) flink.ScanOptions {
	p := 0
	for _, n := range []string{"parallelism", "parallel"} {
		if f := cmd.Flags().Lookup(n); f != nil {
			p, _ = cmd.Flags().GetInt(n)
			break
		}
	}
	return flink.ScanOptions{Parallelism: p, Progress: newProgress(cmd, g)}
}

// flinkWidthLoad is the per-subtask load of one keyed operator at a
// parallelism: Flink deals key groups to subtasks in contiguous ranges
// (KeyGroupRangeAssignment), the same rule as rebucket's buckets to workers.
type flinkWidthLoad struct {
	Operator    string         `json:"operator"`
	Parallelism int            `json:"parallelism"`
	Subtasks    []flinkSubtask `json:"subtasks"`
	Idle        []int          `json:"idle_subtasks"`
	Imbalance   float64        `json:"imbalance"`
	load        []plan.WorkerLoad
}

type flinkSubtask struct {
	Subtask       int    `json:"subtask"`
	FirstKeyGroup int    `json:"first_key_group"`
	LastKeyGroup  int    `json:"last_key_group"`
	Entries       uint64 `json:"entries"`
	Bytes         uint64 `json:"bytes"`
}

func flinkLoadAt(op flink.OperatorReport, p int) flinkWidthLoad {
	l := flinkWidthLoad{Operator: flinkOpName(op), Parallelism: p, Idle: []int{}}
	var total, most uint64
	for i := 0; i < p; i++ {
		s := flinkSubtask{Subtask: i, FirstKeyGroup: -1, LastKeyGroup: -1}
		if p <= op.MaxParallelism {
			lo, hi := keytype.KeyGroupRange(i, op.MaxParallelism, p)
			s.FirstKeyGroup, s.LastKeyGroup = lo, hi
			for g := lo; g <= hi && g < len(op.KeyGroups); g++ {
				s.Entries += op.KeyGroups[g].Entries
				s.Bytes += op.KeyGroups[g].Bytes
			}
		}
		if s.FirstKeyGroup < 0 || s.FirstKeyGroup > s.LastKeyGroup {
			l.Idle = append(l.Idle, i)
		}
		total += s.Bytes
		most = max(most, s.Bytes)
		l.Subtasks = append(l.Subtasks, s)
	}
	if total > 0 {
		l.Imbalance = float64(most) / (float64(total) / float64(p))
	}
	return l
}

func flinkOpName(op flink.OperatorReport) string {
	if op.UID != "" {
		return op.UID
	}
	if op.Name != "" {
		return op.Name
	}
	return op.ID
}

func renderFlinkLoad(w io.Writer, l flinkWidthLoad) {
	fmt.Fprintf(w, "  load of %s at parallelism %d (imbalance %.2f, %d idle):\n", l.Operator, l.Parallelism, l.Imbalance, len(l.Idle))
	rows := make([]barRow, 0, len(l.Subtasks))
	for _, s := range l.Subtasks {
		label := fmt.Sprintf("subtask %d", s.Subtask)
		note := "idle"
		if s.FirstKeyGroup >= 0 && s.FirstKeyGroup <= s.LastKeyGroup {
			note = fmt.Sprintf("kg %d..%d  %s entries  %s", s.FirstKeyGroup, s.LastKeyGroup, units.Count(s.Entries), units.Bytes(int64(s.Bytes)))
		}
		rows = append(rows, barRow{label: label, value: float64(s.Bytes), note: note})
	}
	if len(rows) > 16 {
		// A bar per subtask does not fit a screen: the spread says as much.
		lo, hi := l.Subtasks[0], l.Subtasks[0]
		for _, st := range l.Subtasks {
			if st.Bytes < lo.Bytes {
				lo = st
			}
			if st.Bytes > hi.Bytes {
				hi = st
			}
		}
		fmt.Fprintf(w, "  lightest subtask %d (%s entries, %s), heaviest subtask %d (%s entries, %s); --json lists each\n",
			lo.Subtask, units.Count(lo.Entries), units.Bytes(int64(lo.Bytes)), hi.Subtask, units.Count(hi.Entries), units.Bytes(int64(hi.Bytes)))
		return
	}
	drawBars(w, rows, 24)
}

// flinkInspectReport is inspect's --json document for a savepoint.
type flinkInspectReport struct {
	Engine string `json:"engine"`
	*flink.Report
	Loads []flinkWidthLoad `json:"load_at_parallelism"`
}

func runFlinkInspect(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "top-keys"); err != nil {
		return err
	}
	rep, err := flink.Inspect(cmd.Context(), args[0], flinkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	doc := flinkInspectReport{Engine: engineFlink, Report: rep, Loads: []flinkWidthLoad{}}
	for _, op := range rep.Operators {
		if len(op.KeyGroups) > 0 {
			doc.Loads = append(doc.Loads, flinkLoadAt(op, op.Parallelism))
		}
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Flink savepoint %s\n", rep.Path)
	fmt.Fprintf(w, "  _metadata version %d, checkpoint %d, max parallelism %d, %s keyed entries\n",
		rep.Version, rep.CheckpointID, rep.MaxParallelism, units.Count(rep.Entries))
	if len(rep.MasterStates) > 0 {
		fmt.Fprintf(w, "  master states: %s\n", strings.Join(rep.MasterStates, ", "))
	}
	for _, op := range rep.Operators {
		fmt.Fprintf(w, "operator %s", flinkOpName(op))
		if op.Name != "" && op.Name != op.UID {
			fmt.Fprintf(w, " (%s)", op.Name)
		}
		fmt.Fprintf(w, "  id %s  parallelism %d  max parallelism %d  %d subtask states", op.ID, op.Parallelism, op.MaxParallelism, op.Subtasks)
		if op.FullyFinished {
			fmt.Fprint(w, "  fully finished")
		}
		fmt.Fprintln(w)
		if op.Coordinator > 0 {
			fmt.Fprintf(w, "  coordinator state: %s\n", units.Bytes(int64(op.Coordinator)))
		}
		if op.KeySerializer != "" {
			kt := op.KeyType
			if kt == "" {
				kt = "NOT rehashable: " + op.KeyTypeError
			}
			comp := ""
			if op.Compressed {
				comp = ", Snappy-compressed key groups"
			}
			fmt.Fprintf(w, "  key: %s (%s)%s\n", kt, op.KeySerializer, comp)
		}
		for _, s := range op.States {
			fmt.Fprintf(w, "  keyed state %-40q %-6s %12s entries %10s\n", s.Name, s.Kind, units.Count(s.Entries), units.Bytes(int64(s.Bytes)))
		}
		for _, s := range op.SubtaskLoads {
			fmt.Fprintf(w, "  subtask %d: key groups %d..%d, %s handle, %s, %s entries\n", s.Subtask, s.StartGroup, s.EndGroup, s.Handle, units.Bytes(s.Bytes), units.Count(s.Entries))
		}
		for _, s := range op.OperatorState {
			fmt.Fprintf(w, "  operator state %q (%s) of subtask %d: %d partitions, %s handle, %s\n", s.Name, s.Mode, s.Subtask, s.Partitions, s.Handle, units.Bytes(s.Bytes))
		}
		if len(op.KeyGroups) > 0 {
			renderFlinkLoad(w, flinkLoadAt(op, op.Parallelism))
		}
	}
	return nil
}

// flinkVerifySummary is verify's summary for a savepoint.
type flinkVerifySummary struct {
	Engine         string           `json:"engine"`
	Savepoint      string           `json:"savepoint"`
	MaxParallelism int              `json:"max_parallelism"`
	Entries        uint64           `json:"entries"`
	Errors         int              `json:"errors"`
	Width          *flinkWidthCheck `json:"width,omitempty"`
	ElapsedSeconds float64          `json:"elapsed_seconds"`
}

type flinkWidthCheck struct {
	Parallelism int              `json:"parallelism"`
	Restorable  bool             `json:"restorable"`
	Reason      string           `json:"reason,omitempty"`
	Loads       []flinkWidthLoad `json:"loads"`
}

type flinkFindingLine struct {
	Type string `json:"type"`
	flink.Finding
}

func runFlinkVerify(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "deep"); err != nil {
		return err
	}
	against, _ := cmd.Flags().GetString("against")
	if against != "" {
		return runFlinkVerifyAgainst(cmd, g, args[0], against)
	}
	width, _ := cmd.Flags().GetInt("width")
	if cmd.Flags().Changed("width") && width < 1 {
		return usagef(fmt.Errorf("--width %d: want a parallelism of at least 1", width))
	}
	start := time.Now()
	rep, err := flink.Verify(cmd.Context(), args[0], flinkScanOptions(cmd, g))
	w := cmd.OutOrStdout()
	if err != nil {
		if cmd.Context().Err() != nil {
			return err
		}
		if g.JSON {
			_ = writeSummaryLine(w, flinkVerifySummary{Engine: engineFlink, Savepoint: args[0]}, err)
			return silentError{err}
		}
		return err
	}
	sum := flinkVerifySummary{Engine: engineFlink, Savepoint: args[0], MaxParallelism: rep.MaxParallelism, Entries: rep.Entries, Errors: rep.FindingsTotal}
	for _, f := range rep.Findings {
		if g.JSON {
			_ = writeJSONLine(w, flinkFindingLine{"finding", f})
		} else {
			fmt.Fprintln(w, f.String())
		}
	}
	if rep.FindingsTotal > len(rep.Findings) && !g.JSON {
		fmt.Fprintf(w, "... and %d more findings\n", rep.FindingsTotal-len(rep.Findings))
	}
	if width > 0 {
		wc := &flinkWidthCheck{Parallelism: width, Restorable: width <= rep.MaxParallelism, Loads: []flinkWidthLoad{}}
		if !wc.Restorable {
			rec := recommendFlink(rep.MaxParallelism, width)
			wc.Reason = fmt.Sprintf("parallelism %d is above the max parallelism %d: Flink refuses to start (\"The maximum parallelism (%d) of the restored state is lower than the configured parallelism (%d)\"); rewrite it: %s",
				width, rep.MaxParallelism, rep.MaxParallelism, width, flinkRewriteHint(args[0], rec))
		}
		for _, op := range rep.Operators {
			if len(op.KeyGroups) > 0 && wc.Restorable {
				wc.Loads = append(wc.Loads, flinkLoadAt(op, width))
			}
		}
		sum.Width = wc
	}
	sum.ElapsedSeconds = time.Since(start).Seconds()
	if g.JSON {
		_ = writeSummaryLine(w, sum, nil)
	} else {
		fmt.Fprintf(w, "Flink savepoint %s: max parallelism %d, %s keyed entries read, every key rehashed: %d findings (%s)\n",
			args[0], rep.MaxParallelism, units.Count(rep.Entries), rep.FindingsTotal, units.Duration(time.Since(start)))
		if wc := sum.Width; wc != nil {
			if wc.Restorable {
				for _, l := range wc.Loads {
					renderFlinkLoad(w, l)
				}
				fmt.Fprintf(w, "a start at parallelism %d can restore it\n", width)
			} else {
				fmt.Fprintf(w, "a start at parallelism %d can NOT restore it: %s\n", width, wc.Reason)
			}
		}
	}
	if rep.FindingsTotal > 0 || (sum.Width != nil && !sum.Width.Restorable) {
		return silentError{ErrFindings}
	}
	return nil
}

// recommendFlink is the max parallelism to suggest for a parallelism:
// the one recommendation rule (plan --recommend), within Flink's bound.
func recommendFlink(maxP, p int) int {
	return min(keytype.MaxParallelismUpperBound, plan.SuggestBuckets(maxP, p))
}

// flinkRewriteHint is the command that raises a savepoint's max parallelism
// to m, on the user's own path.
func flinkRewriteHint(src string, m int) string {
	return fmt.Sprintf("rebucket rewrite %s --buckets %d --out %s", plan.ShellQuote(src), m, plan.ShellQuote(plan.SuggestTarget(src, m)))
}

type flinkEqualSummary struct {
	Engine string `json:"engine"`
	Target string `json:"target"`
	Source string `json:"source"`
	*flink.EqualReport
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

func runFlinkVerifyAgainst(cmd *cobra.Command, g *globalOptions, target, source string) error {
	if err := refuseFlags(cmd, "Flink", "width"); err != nil {
		return err
	}
	if !flink.IsSavepoint(source) {
		return usagef(fmt.Errorf("--against %s: not a Flink savepoint; a savepoint is compared with a savepoint", source))
	}
	start := time.Now()
	rep, err := flink.Equal(cmd.Context(), target, source, flinkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	if rep.Differences == nil {
		rep.Differences = []string{}
	}
	sum := flinkEqualSummary{Engine: engineFlink, Target: target, Source: source, EqualReport: rep, ElapsedSeconds: time.Since(start).Seconds()}
	return reportEngineEqual(cmd, g, sum, rep.Equal, rep.Differences, fmt.Sprintf("TARGET %s (%s entries) against SOURCE %s (%s entries): %s (%s)",
		target, units.Count(rep.EntriesA), source, units.Count(rep.EntriesB),
		equalVerdict(rep.Equal, len(rep.Differences), "the same keyed entries (operator, state, key, namespace, user key, value), operator, coordinator and master state"),
		units.Duration(time.Since(start))))
}

// flinkRewriteReport is rewrite's --json document for a savepoint.
type flinkRewriteReport struct {
	Engine string `json:"engine"`
	*flink.RewriteResult
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
}

func runFlinkRewrite(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "mapping", "file-size", "compression", "note", "drop-state", "rename-state", "no-verify", "skip-uncommitted"); err != nil {
		return err
	}
	a, restore, err := parseEngineRewrite(cmd, "Flink savepoints", "Flink max parallelism", keytype.MaxParallelismUpperBound)
	if err != nil {
		return err
	}
	defer restore()
	if err := refuseOverlap([]string{a.out}, []string{a.tmp}, flinkDir(args[0])); err != nil {
		return err
	}
	start := time.Now()
	res, err := flink.Rewrite(cmd.Context(), args[0], a.out, flink.RewriteOptions{
		MaxParallelism: a.buckets, Memory: a.memory, TmpDir: a.tmp, Parallelism: a.parallelism, Progress: newProgress(cmd, g),
	})
	if err != nil {
		return err
	}
	rep := flinkRewriteReport{Engine: engineFlink, RewriteResult: res, ElapsedSeconds: time.Since(start).Seconds(), PeakRSS: peakRSS()}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Flink savepoint %s: max parallelism %d -> %d, %s keyed entries re-keyed and regrouped\n",
		res.Source, res.FromMaxParallelism, res.MaxParallelism, units.Count(res.Entries))
	for _, op := range res.Operators {
		fmt.Fprintf(w, "  operator %s (%s keys): %s entries in %d files, %s\n", op.UID, op.KeyType, units.Count(op.Entries), op.Files, units.Bytes(op.Bytes))
	}
	if res.SpilledRuns > 0 {
		fmt.Fprintf(w, "  spilled %s in %d runs\n", units.Bytes(res.SpillBytes), res.SpilledRuns)
	}
	if res.Verified {
		fmt.Fprintln(w, "  proved before publishing: every entry under its new key group, the same entries, operator and master state as the source")
	}
	fmt.Fprintf(w, "wrote %s in %s; restore it with max parallelism %d (or leave max parallelism unset) at any parallelism up to %d\n",
		res.Target, units.Duration(time.Since(start)), res.MaxParallelism, res.MaxParallelism)
	return nil
}

// flinkPlanReport is plan's --json document for a savepoint.
type flinkPlanReport struct {
	Engine                    string           `json:"engine"`
	Savepoint                 string           `json:"savepoint"`
	MaxParallelism            int              `json:"max_parallelism"`
	Widths                    []flinkWidthPlan `json:"widths"`
	RecommendedMaxParallelism int              `json:"recommended_max_parallelism,omitempty"`
}

type flinkWidthPlan struct {
	Parallelism int              `json:"parallelism"`
	Feasible    bool             `json:"feasible"`
	Advice      string           `json:"advice,omitempty"`
	Loads       []flinkWidthLoad `json:"loads"`
}

func runFlinkPlan(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "mapping", "memory", "top-keys", "buckets"); err != nil {
		return err
	}
	widths, _ := cmd.Flags().GetIntSlice("widths")
	for _, w := range widths {
		if w < 1 {
			return usagef(fmt.Errorf("--widths: %d is not a parallelism", w))
		}
	}
	rep, err := flink.Inspect(cmd.Context(), args[0], flinkScanOptions(cmd, g))
	if err != nil {
		return err
	}
	doc := flinkPlanReport{Engine: engineFlink, Savepoint: args[0], MaxParallelism: rep.MaxParallelism, Widths: []flinkWidthPlan{}}
	peak := 0
	for _, w := range widths {
		wp := flinkWidthPlan{Parallelism: w, Feasible: w <= rep.MaxParallelism, Loads: []flinkWidthLoad{}}
		peak = max(peak, w)
		for _, op := range rep.Operators {
			if len(op.KeyGroups) > 0 && wp.Feasible {
				wp.Loads = append(wp.Loads, flinkLoadAt(op, w))
			}
		}
		doc.Widths = append(doc.Widths, wp)
	}
	if peak > rep.MaxParallelism {
		doc.RecommendedMaxParallelism = recommendFlink(rep.MaxParallelism, peak)
		for i := range doc.Widths {
			if !doc.Widths[i].Feasible {
				doc.Widths[i].Advice = flinkRewriteHint(args[0], doc.RecommendedMaxParallelism)
			}
		}
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Flink savepoint %s: max parallelism %d (the most subtasks that can own keyed state)\n", args[0], rep.MaxParallelism)
	if len(widths) == 0 {
		fmt.Fprintln(w, "give --widths P1,P2,... to plan parallelisms")
	}
	for _, wp := range doc.Widths {
		if !wp.Feasible {
			fmt.Fprintf(w, "parallelism %d: NOT feasible: above the max parallelism %d; Flink refuses the restore\n  way out: %s\n", wp.Parallelism, rep.MaxParallelism, wp.Advice)
			continue
		}
		fmt.Fprintf(w, "parallelism %d: feasible\n", wp.Parallelism)
		for _, l := range wp.Loads {
			renderFlinkLoad(w, l)
		}
	}
	return nil
}

// flinkLocateReport is locate's --json document for a savepoint.
type flinkLocateReport struct {
	Engine    string           `json:"engine"`
	Savepoint string           `json:"savepoint"`
	Key       string           `json:"key"`
	Operators []flinkLocatedOp `json:"operators"`
}

type flinkLocatedOp struct {
	Operator       string          `json:"operator"`
	KeyType        string          `json:"key_type"`
	KeyHex         string          `json:"key_hex"`
	HashCode       int32           `json:"java_hash_code"`
	KeyGroup       int             `json:"key_group"`
	MaxParallelism int             `json:"max_parallelism"`
	Parallelism    int             `json:"parallelism"`
	Subtask        int             `json:"subtask"`
	Entries        []flinkLocEntry `json:"entries"`
}

type flinkLocEntry struct {
	State     string `json:"state"`
	Kind      string `json:"kind"`
	Timestamp *int64 `json:"timer_timestamp,omitempty"`
	RestHex   string `json:"namespace_user_key_hex"`
	ValueHex  string `json:"value_hex"`
}

func runFlinkLocate(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "key-format"); err != nil {
		return err
	}
	keyType, _ := cmd.Flags().GetString("key-type")
	width, _ := cmd.Flags().GetInt("width")
	if cmd.Flags().Changed("width") && width < 1 {
		return usagef(fmt.Errorf("--width %d: want a parallelism of at least 1", width))
	}
	var forced keytype.Codec
	if keyType != "" {
		c, err := keytype.ForName(keyType)
		if err != nil {
			return usagef(err)
		}
		forced = c
	}
	sp, err := flink.Open(args[0])
	if err != nil {
		return err
	}
	rep := flinkLocateReport{Engine: engineFlink, Savepoint: args[0], Key: args[1], Operators: []flinkLocatedOp{}}
	// The key in each keyed operator's own serialization, found once per
	// operator from its first entry's codec.
	type target struct {
		idx   int
		key   []byte
		codec keytype.Codec
	}
	targets := map[*flink.OperatorState]*target{}
	skipped := map[*flink.OperatorState]bool{}
	err = sp.ForEachEntry(cmd.Context(), func(e *flink.KeyedEntry) error {
		op := e.Operator
		if skipped[op] {
			return nil
		}
		t := targets[op]
		if t == nil {
			c := e.KeyCodec
			if c == nil || (forced != nil && forced.Name() != c.Name()) {
				skipped[op] = true
				return nil
			}
			kb, err := c.Encode(args[1])
			if err != nil {
				skipped[op] = true
				return nil
			}
			h, err := c.HashCode(kb)
			if err != nil {
				return err
			}
			maxP := int(op.MaxParallelism)
			p := width
			if p == 0 {
				p = int(op.Parallelism)
			}
			lo := flinkLocatedOp{Operator: flinkOpLabel(op), KeyType: c.Name(), KeyHex: hex.EncodeToString(kb), HashCode: h,
				KeyGroup: keytype.KeyGroup(h, maxP), MaxParallelism: maxP, Parallelism: p, Subtask: -1, Entries: []flinkLocEntry{}}
			if p <= maxP {
				lo.Subtask = keytype.OperatorIndex(lo.KeyGroup, maxP, p)
			}
			rep.Operators = append(rep.Operators, lo)
			t = &target{idx: len(rep.Operators) - 1, key: kb, codec: c}
			targets[op] = t
		}
		lo := &rep.Operators[t.idx]
		if e.KeyGroup != lo.KeyGroup || string(e.Key) != string(t.key) {
			return nil
		}
		le := flinkLocEntry{State: flink.JavaString(e.State.Name), Kind: e.State.Kind(), RestHex: hex.EncodeToString(e.Rest), ValueHex: hex.EncodeToString(e.Value)}
		if e.State.IsTimers() {
			ts := e.Timestamp
			le.Timestamp = &ts
		}
		lo.Entries = append(lo.Entries, le)
		return nil
	})
	if err != nil {
		return err
	}
	if len(rep.Operators) == 0 {
		what := "no keyed operator's key type can spell it"
		if forced != nil {
			what = fmt.Sprintf("no keyed operator has keys of type %s", forced.Name())
		}
		return fmt.Errorf("%w: key %q: %s; give --key-type matching an operator's key (see inspect)", snapshotfmt.ErrInvalidArgument, args[1], what)
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	w := cmd.OutOrStdout()
	for _, lo := range rep.Operators {
		owner := fmt.Sprintf("subtask %d of %d", lo.Subtask, lo.Parallelism)
		if lo.Subtask < 0 {
			owner = fmt.Sprintf("no subtask: parallelism %d is above the max parallelism %d", lo.Parallelism, lo.MaxParallelism)
		}
		fmt.Fprintf(w, "operator %s: %s key %q (bytes %s), hashCode %d, key group %d of %d, owned by %s; %d entries\n",
			lo.Operator, lo.KeyType, args[1], lo.KeyHex, lo.HashCode, lo.KeyGroup, lo.MaxParallelism, owner, len(lo.Entries))
		for _, e := range lo.Entries {
			if e.Timestamp != nil {
				fmt.Fprintf(w, "  %s (%s): timer at %d\n", e.State, e.Kind, *e.Timestamp)
				continue
			}
			fmt.Fprintf(w, "  %s (%s): namespace/user key %s value %s\n", e.State, e.Kind, e.RestHex, e.ValueHex)
		}
	}
	return nil
}

func flinkOpLabel(op *flink.OperatorState) string {
	if op.UID != "" {
		return flink.JavaString(op.UID)
	}
	if op.Name != "" {
		return flink.JavaString(op.Name)
	}
	return op.IDString()
}

// runFlinkGenerate writes a canonical savepoint of the probe job (the job
// of interop/flink) for benchmarks and trials: --keys (or --entries / 5,
// the entries per key) keys per keyed operator, --buckets as the max
// parallelism, --width as the keyed operators' parallelism.
func runFlinkGenerate(cmd *cobra.Command, g *globalOptions, args []string) error {
	if err := refuseFlags(cmd, "Flink", "mapping", "sub-keys", "list-len", "value-size", "spread", "skew", "seed",
		"no-worker-state", "file-size", "compression", "force"); err != nil {
		return err
	}
	out, _ := cmd.Flags().GetString("out")
	keys, _ := cmd.Flags().GetInt("keys")
	entries, _ := cmd.Flags().GetInt("entries")
	buckets, _ := cmd.Flags().GetInt("buckets")
	width, _ := cmd.Flags().GetInt("width")
	if keys == 0 {
		keys = 1000
		if entries > 0 {
			keys = max(1, entries/5) // five entries per key: count, tags, events, two timers
		}
	}
	start := time.Now()
	if err := flink.Generate(out, flink.GenerateOptions{Keys: keys, MaxParallelism: buckets, Parallelism: width}); err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"engine": engineFlink, "out": out, "keys": keys, "max_parallelism": buckets,
			"parallelism": width, "elapsed_seconds": time.Since(start).Seconds()})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote a canonical Flink savepoint of the probe job to %s: %s keys per keyed operator, max parallelism %d, parallelism %d (%s)\n",
		out, units.Count(uint64(keys)), buckets, width, units.Duration(time.Since(start)))
	return nil
}

// flinkDir is the savepoint directory of a path that names it or its
// _metadata file: the input that no output may overlap.
func flinkDir(path string) string {
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		return filepath.Dir(path)
	}
	return path
}
