package main

import (
	"fmt"

	"github.com/rebucket/rebucket/dataset"
)

// exportFormat picks export's format: --format when given, else --out's
// extension, else Parquet. A --format that contradicts a known extension
// is refused (x.arrow holding Parquet bytes misleads every reader), and so
// is --out -: an export is published by rename, with a sibling file, which
// standard output cannot take.
func exportFormat(o *exportOptions, formatGiven bool) (dataset.Format, error) {
	if o.out == "-" {
		return "", fmt.Errorf("--out -: export does not write to standard output (it publishes a file atomically, with its per-worker state beside it); give a file name, e.g. --out x.jsonl, and read that")
	}
	byExt, known := dataset.FormatOfPath(o.out)
	if o.partitionBy != "" {
		// A directory: its name says nothing about the format.
		known = false
	}
	if !formatGiven {
		if known {
			return byExt, nil
		}
		return dataset.Parquet, nil
	}
	f, err := dataset.ParseFormat(o.format)
	if err != nil {
		return "", err
	}
	if known && f != byExt {
		// The format is returned with the error: the caller refuses after
		// its safety checks.
		return f, fmt.Errorf("--format %s but --out %s has the extension of %s: drop --format, or name the file with %s", f, o.out, byExt, f.Ext())
	}
	return f, nil
}
