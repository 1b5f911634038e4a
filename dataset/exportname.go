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

// WorkerStateDir holds the per-worker state table of a partitioned export.
// Not a Hive directory (no key=value) and not named *.parquet/*.arrow/
// *.jsonl, so the natural globs (DuckDB's read_parquet('dir/**/*.parquet',
// hive_partitioning=true)) never mix it into the data: at the root as
// _worker_state.parquet it made DuckDB fail with "Hive partition mismatch".
// The leading underscore keeps pyarrow and Spark from reading it as data.
const WorkerStateDir = "_rebucket"

// workerStateRel is the per-worker table of a partitioned export, relative
// to its directory: an alternative extension of the format (tools read it
// by content) that no data glob matches.
func workerStateRel(f Format) string {
	ext := ".parq"
	switch f {
	case Arrow:
		ext = ".ipc"
	case JSONL:
		ext = ".ndjson"
	}
	return WorkerStateDir + "/worker_state" + ext
}
