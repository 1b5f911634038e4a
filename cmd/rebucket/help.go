package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandExamples is the Examples section of each command's --help, taken
// from the README's 4-to-40 story: `snap` is a snapshot with 8 buckets
// written by 4 workers (`rebucket generate --out snap`), which must grow to
// 40 workers.
var commandExamples = map[string]string{
	"generate": `  # the story's snapshot: 8 buckets written by 4 workers
  rebucket generate --out snap --buckets 8 --width 4 --entries 100000
  # a skewed one, to see hot keys
  rebucket generate --out skewed --entries 1000000 --skew zipf`,
	"inspect": `  rebucket inspect snap
  rebucket inspect snap --top-keys 10 --json`,
	"rewrite": `  # make room for 40 workers: a split, proved equal before it is published
  rebucket rewrite snap --buckets 160 --out snap-160
  # the checks and the plan first, writing nothing
  rebucket rewrite snap --buckets 160 --out snap-160 --dry-run
  # change the mapping within a memory budget
  rebucket rewrite snap --buckets 100 --mapping range --out snap-100 --memory 2GiB`,
	"split": `  # one state to its own snapshot, the rest to another
  rebucket split snap --out sessions --out rest --by state=sessions/open
  rebucket split snap --out low --out high --by buckets=0-3`,
	"verify": `  rebucket verify snap-160 --width 40          # can the next start at 40 load it?
  rebucket verify snap-160 --against snap       # key-level equality with the source
  rebucket verify snap --deep --json`,
	"export": `  rebucket export snap --format parquet --out snap.parquet
  rebucket export snap --format arrow --out snap.arrow --state sessions/open
  rebucket export snap --format jsonl --out worker3.jsonl --worker 3/40`,
	"import": `  # rebuild a snapshot at 160 buckets from an export
  rebucket export snap --out snap.parquet
  rebucket import snap.parquet --buckets 160 --out snap-160`,
	"plan": `  rebucket plan snap --widths 4,40               # can 40 workers own state?
  rebucket plan --recommend --peak-width 40      # choose the new count once, with headroom
  rebucket plan snap --buckets 160               # what the rewrite will do and cost
  rebucket plan snap --top-keys 10`,
	"locate": `  rebucket locate snap user-000000042 --width 40
  rebucket locate snap 757365722d303030303030303432 --key-format hex`,
	"load": `  # build the 40 workers' Pebble stores, as a restart would
  rebucket load snap-160 --width 40 --into stores
  rebucket load snap --width 40 --into stores --on-excess idle --dry-run`,
}

// enumFlagValues are the values of the flags that take one of a few words,
// for shell completion. A "command/flag" entry overrides the plain flag
// name for that command.
var enumFlagValues = map[string][]string{
	"format":             {"parquet", "arrow", "jsonl"},
	"mapping":            {"mod", "range"},
	"on-excess":          {"reject", "cap", "idle"},
	"compression":        {"snappy", "zstd", "none"},
	"export/compression": {"zstd", "snappy", "none"},
	"clip":               {"rewrite", "excise"},
	"dedupe":             {"first", "last"},
	"partition-by":       {"state", "bucket"},
	"key-format":         {"utf8", "hex"},
	"skew":               {"uniform", "zipf"},
	"engine":             {"auto", "native", "flink", "spark"},
	"generate/engine":    {"native", "flink", "spark"},
}

// enumValues returns the completion values of flag on cmd, if it is one of
// the enum flags.
func enumValues(cmd *cobra.Command, flag string) ([]string, bool) {
	if v, ok := enumFlagValues[cmd.Name()+"/"+flag]; ok {
		return v, true
	}
	v, ok := enumFlagValues[flag]
	return v, ok
}

// addHelpAndCompletion gives every command below root its Examples and
// value completion for its enum flags.
func addHelpAndCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if ex, ok := commandExamples[c.Name()]; ok && c.Example == "" {
			c.Example = ex
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			values, ok := enumValues(c, f.Name)
			if !ok {
				return
			}
			_ = c.RegisterFlagCompletionFunc(f.Name, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				var out []cobra.Completion
				for _, v := range values {
					if strings.HasPrefix(v, toComplete) {
						out = append(out, v)
					}
				}
				return out, cobra.ShellCompDirectiveNoFileComp
			})
		})
	}
}
