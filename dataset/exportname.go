package dataset

import (
	"path/filepath"
	"strings"
)

// FormatOfPath is the format an output name's extension asks for: .parquet,
// .arrow/.feather/.ipc, .jsonl/.ndjson/.json; ok is false for any other
// extension or none.
func FormatOfPath(path string) (f Format, ok bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return Parquet, true
	case ".arrow", ".feather", ".ipc":
		return Arrow, true
	case ".jsonl", ".ndjson", ".json":
		return JSONL, true
	}
	return "", false
}
