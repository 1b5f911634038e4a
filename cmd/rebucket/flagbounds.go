package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Bounds of numeric flags. A flag given explicitly with 0 is refused, not
// read as "use the default": `plan --buckets 0` used to plan nothing and
// `verify --width 0` to check nothing, both with exit 0.

// setPositive refuses each named int flag that was given and is below 1 or
// above most.
func setPositive(cmd *cobra.Command, most int, names ...string) error {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		v, err := cmd.Flags().GetInt(name)
		if err != nil {
			return usagef(err)
		}
		if v < 1 || v > most {
			return usagef(fmt.Errorf("--%s %d: want 1..%d (leave the flag out for its default)", name, v, most))
		}
	}
	return nil
}

// checkWidthFlag bounds a width flag by the widest start a manifest can
// record (FORMAT.md, width_at_write).
func checkWidthFlag(cmd *cobra.Command, name string) error {
	return setPositive(cmd, snapshotfmt.MaxWidth, name)
}

// checkFileSizeFlag bounds --file-size (plan.CheckFileSize) before anything
// is written; with a source snapshot, also by the files its data would
// make. A source that does not open is left for the command to report.
func checkFileSizeFlag(fileSize int64, source string) error {
	var data int64
	if source != "" {
		if s, err := reader.Open(source, reader.Options{}); err == nil {
			data = s.Manifest().DataBytes()
		}
	}
	if err := plan.CheckFileSize(fileSize, data); err != nil {
		return usagef(err)
	}
	return nil
}
