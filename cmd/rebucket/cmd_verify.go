package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/verify"
)

func init() { registerCommand(newVerifyCommand) }

type verifyOptions struct {
	width, maxDiffs, parallel int
	deep                      bool
	against                   string
}

func newVerifyCommand(g *globalOptions) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify SNAPSHOT [--width W] [--deep] | verify TARGET --against SOURCE",
		Short: "Check a snapshot before a restart, or prove two snapshots hold the same entries",
		Long: `verify SNAPSHOT checks one snapshot:
  - the manifest: format, version, self-checksum and internal consistency;
  - every listed data and per-worker file: present, regular, of its size, with
    its checksum (a damaged table is caught here, before it is ever opened);
    unlisted files in data/ or workers/ are warnings;
  - with --deep, every table scanned: keys sorted, unique and decodable, each
    entry in the bucket its key hashes to and inside its file's range, state
    ids known, list values in the item encoding, no key in two files,
    per-bucket and per-state counts equal to the manifest's. Without the flag the scan runs when the data is at most
    2 GiB (about a minute to read) and the output says which it did;
    --deep=false never scans;
  - with --width W, whether a start at W can load it (W at most the bucket
    count, the per-worker load at W, idle workers).

verify TARGET --against SOURCE proves key-level equality: the multiset of
(step, state, key, sub-key, value) is the same in both, whatever their bucket
counts and mappings, every TARGET entry sits in its bucket, and the per-worker
state matches (same rule; equal per-worker items at equal widths; otherwise
split state as a multiset of items, union as a set, broadcast by its copy).
A fast pass compares per-bucket fingerprints of TARGET's layout, reading both
once; only differing buckets are diffed exactly, naming up to --max-diffs
entries per kind: missing (SOURCE only), extra (TARGET only), changed,
misplaced, worker_state. --deep and --width do not combine with --against
(which reads every entry of both anyway): run "verify TARGET --deep --width W"
on its own for those checks.

Every finding is streamed, all of them: one line each, or with --json one
JSON object per line ({"type":"finding",...}) and then {"type":"summary",...}.
A finding has a kind (e.g. file_checksum, wrong_bucket, missing), a severity
(error or warning), and where known the file, bucket, state and key (hex,
and as text for utf8 keys).

Exit codes of verify:
  0  verified (warnings may have been printed)
  1  findings: the check ran and found errors
  2  could not run: bad arguments, or no usable manifest (missing, torn,
     edited, inconsistent such as overlapping files, unsupported version:
     reported first as a manifest_* finding, since nothing else can be
     checked without it); with --against, a snapshot whose files cannot be
     read (run verify on it alone to list what is wrong)
  4  a listed file could not be read (an I/O error such as EIO): a failure
     of the run, not damage; the file_unreadable finding names it
  130 interrupted`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.against != "" {
				if cmd.Flags().Changed("width") || cmd.Flags().Changed("deep") {
					return usagef(fmt.Errorf("--width and --deep check one snapshot and do not combine with --against (which reads every entry of both snapshots anyway); run them on their own: `rebucket verify %s --deep` (add --width W to check a start)", args[0]))
				}
				return runVerifyAgainst(cmd, g, o, args[0])
			}
			if cmd.Flags().Changed("max-diffs") {
				return usagef(fmt.Errorf("--max-diffs applies only with --against"))
			}
			return runVerify(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.width, "width", 0, "also check whether a start at this width can load the snapshot")
	f.BoolVar(&o.deep, "deep", false, "scan every entry (default: when the data is at most 2 GiB); --deep=false never scans")
	f.StringVar(&o.against, "against", "", "prove key-level equality with this SOURCE snapshot")
	f.IntVar(&o.maxDiffs, "max-diffs", 10, "with --against: differences listed per kind (the rest are counted)")
	f.IntVar(&o.parallel, "parallelism", 0, "files read at once (default: the number of CPUs)")
	// --parallel was this flag's name; every other command says --parallelism.
	f.IntVar(&o.parallel, "parallel", 0, "files read at once (default: the number of CPUs)")
	_ = f.MarkDeprecated("parallel", "use --parallelism")
	return cmd
}

// findingLine is a finding as one --json line.
type findingLine struct {
	Type string `json:"type"`
	verify.Finding
}

// MarshalJSON is the finding's object with "type" first (Finding has its
// own MarshalJSON, which embedding would otherwise promote).
func (l findingLine) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.Finding)
	if err != nil {
		return nil, err
	}
	t, _ := json.Marshal(l.Type)
	return append(append(append([]byte(`{"type":`), t...), ','), b[1:]...), nil
}

// streamer prints findings as they arrive.
func streamer(w io.Writer, g *globalOptions) verify.Sink {
	return func(f verify.Finding) {
		if g.JSON {
			_ = writeJSONLine(w, findingLine{"finding", f})
			return
		}
		fmt.Fprintln(w, f.String())
	}
}

// verifyOutcome turns a run into the exit-code error: could-not-run errors
// are returned as they are (exit 2, silent when a finding already said why),
// errors found give exit 1.
func verifyOutcome(runErr error, errorsFound int, reported bool) error {
	if runErr != nil {
		if reported {
			return silentError{runErr}
		}
		return runErr
	}
	if errorsFound > 0 {
		return silentError{ErrFindings}
	}
	return nil
}

// verifyRan does what both verify modes do once their run returns: an
// interrupt ends the command, and with --json the summary line completes
// the report. done tells whether the command has finished, with result.
func verifyRan(cmd *cobra.Command, g *globalOptions, sum any, errorsFound int, err error) (done bool, result error) {
	if err != nil && cmd.Context().Err() != nil {
		return true, err
	}
	if !g.JSON {
		return false, nil
	}
	if werr := writeSummaryLine(cmd.OutOrStdout(), sum, err); werr != nil {
		return true, werr
	}
	return true, verifyOutcome(err, errorsFound, errorsFound > 0)
}

// writeSummaryLine prints the summary as the last --json line: its fields,
// "type":"summary", and "could_not_run" with the reason when it could not.
func writeSummaryLine(w io.Writer, sum any, runErr error) error {
	data, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	obj["type"] = "summary"
	if runErr != nil {
		obj["could_not_run"] = runErr.Error()
	}
	return writeJSONLine(w, obj)
}

func kindCounts(by map[verify.Kind]int) string {
	ks := make([]string, 0, len(by))
	for k, n := range by {
		ks = append(ks, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func runVerify(cmd *cobra.Command, g *globalOptions, o *verifyOptions, dir string) error {
	if err := checkWidthFlag(cmd, "width"); err != nil {
		return err
	}
	opts := verify.Options{Width: o.width, Parallelism: o.parallel, Progress: newProgress(cmd, g)}
	if cmd.Flags().Changed("deep") {
		opts.Deep = verify.DeepOff
		if o.deep {
			opts.Deep = verify.DeepOn
		}
	}
	w := cmd.OutOrStdout()
	sum, err := verify.Check(cmd.Context(), dir, opts, streamer(w, g))
	if done, res := verifyRan(cmd, g, sum, sum.Errors, err); done {
		return res
	}
	if err != nil {
		fmt.Fprintf(w, "could not verify %s: %v\n", dir, err)
		return verifyOutcome(err, sum.Errors, true)
	}
	scan := "not scanned (" + sum.DeepReason + ")"
	if sum.Deep {
		scan = fmt.Sprintf("%s entries scanned (deep: %s)", units.Count(sum.Entries), sum.DeepReason)
	}
	fmt.Fprintf(w, "%d data files and %d per-worker files checked, %s read; %s\n",
		sum.DataFiles, sum.WorkerFile, units.Bytes(sum.BytesRead), scan)
	for _, nc := range sum.NotCompared {
		fmt.Fprintf(w, "not compared: %s\n", nc)
	}
	if sum.Width != nil {
		renderLoad(w, sum.Width.Load)
		if sum.Width.Loadable {
			fmt.Fprintf(w, "a start at width %d can load it\n", sum.Width.Width)
		} else {
			fmt.Fprintf(w, "a start at width %d cannot own state: the bucket count is %d; %s\n", sum.Width.Width, sum.Width.Buckets,
				widthAdvice(dir, sum.Width.Buckets, sum.Width.Width, fmt.Sprintf("rebucket verify %%s --width %d", sum.Width.Width)))
		}
	}
	if sum.Verified {
		fmt.Fprintf(w, "verified %s in %s (%d warnings)\n", dir, units.Duration(sum.Elapsed), sum.Warnings)
	} else {
		fmt.Fprintf(w, "NOT verified %s: %d errors, %d warnings (%s)\n", dir, sum.Errors, sum.Warnings, kindCounts(sum.ByKind))
	}
	return verifyOutcome(nil, sum.Errors, true)
}

func runVerifyAgainst(cmd *cobra.Command, g *globalOptions, o *verifyOptions, target string) error {
	if o.maxDiffs < 1 {
		return usagef(fmt.Errorf("--max-diffs %d: want at least 1", o.maxDiffs))
	}
	w := cmd.OutOrStdout()
	sum, err := verify.Equal(cmd.Context(), target, o.against,
		verify.EqualOptions{MaxDiffs: o.maxDiffs, Parallelism: o.parallel, Progress: relabel(newProgress(cmd, g), "verify --against: fingerprint both snapshots")}, streamer(w, g))
	if done, res := verifyRan(cmd, g, sum, sum.Errors, err); done {
		return res
	}
	reported := sum.Errors > 0
	if err != nil {
		if reported {
			fmt.Fprintf(w, "could not compare: %v\n", err)
		}
		return verifyOutcome(err, sum.Errors, reported)
	}
	fmt.Fprintf(w, "TARGET %s (%s, %s entries) against SOURCE %s (%s, %s entries): %d of %d buckets differ in the fast pass",
		target, sum.TargetLayout, units.Count(sum.TargetEntries), o.against, sum.SourceLayout, units.Count(sum.SourceEntries),
		sum.BucketsDiffering, sum.Buckets)
	if sum.DiffPasses > 0 {
		fmt.Fprintf(w, " (diffed in %d passes)", sum.DiffPasses)
	}
	fmt.Fprintf(w, "; %d per-worker states compared\n", sum.WorkerStates)
	for _, s := range sum.Incomplete {
		fmt.Fprintf(w, "incomplete: %s\n", s)
	}
	if sum.Equal {
		fmt.Fprintf(w, "equal: every entry and per-worker state matches, every entry in its bucket (%s)\n", units.Duration(sum.Elapsed))
	} else {
		fmt.Fprintf(w, "NOT equal: %d differences (%s)\n", sum.Errors, kindCounts(sum.ByKind))
	}
	return verifyOutcome(nil, sum.Errors, true)
}
