// Package dataset turns a snapshot into an ordinary dataset and back:
// export to Parquet, Arrow IPC (file format) or JSON Lines through the
// reader's Arrow view, and import from Parquet or Arrow IPC into a complete
// snapshot of any bucket count.
//
// Layout of an export at PATH:
//
//   - unpartitioned: PATH is one file; per-worker state, when the snapshot
//     has any, goes to a sibling file PATH-without-extension.workers.EXT.
//   - partitioned (PartitionBy "state" or "bucket"): PATH is a directory of
//     files in the Hive layout (step=S/state=N/part-00000.parquet, or
//     bucket=B/part-00000.parquet) that pyarrow and DuckDB read as
//     partitions; the partition columns are left out of the files (the path
//     carries them). Per-worker state is _rebucket/worker_state.parq (.ipc
//     for Arrow, .ndjson for JSON Lines): the leading underscore keeps
//     pyarrow and Spark from taking it for data, and the extension keeps it
//     out of DuckDB's 'dir/**/*.parquet' glob (a file outside the Hive
//     layout there fails the whole query).
//
// Every Parquet and Arrow file carries in its key-value metadata:
// MetaManifest (the source snapshot's MANIFEST.json), MetaPartitioning (its
// partitioning as JSON) and MetaExport (an ExportMeta: the exported states
// with their kinds and codecs, the filters, the per-worker state file).
package dataset

import (
	"encoding/json"
	"fmt"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Key-value metadata keys of every export file.
const (
	MetaManifest     = "rebucket.manifest"
	MetaPartitioning = "rebucket.partitioning"
	MetaExport       = "rebucket.export"
)

// Format is an export format.
type Format string

const (
	Parquet Format = "parquet"
	Arrow   Format = "arrow"
	JSONL   Format = "jsonl"
)

// ParseFormat accepts parquet, arrow or jsonl.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Parquet, Arrow, JSONL:
		return Format(s), nil
	}
	return "", fmt.Errorf("%w: format %q: want parquet, arrow or jsonl", snapshotfmt.ErrInvalidArgument, s)
}

// Ext is the file extension of the format.
func (f Format) Ext() string {
	switch f {
	case Arrow:
		return ".arrow"
	case JSONL:
		return ".jsonl"
	}
	return ".parquet"
}

// ExportMeta is MetaExport: what an export holds, so import can rebuild a
// snapshot without guessing.
type ExportMeta struct {
	Version      int                      `json:"version"`
	Tool         string                   `json:"tool"`
	Partitioning snapshotfmt.Partitioning `json:"partitioning"`
	WidthAtWrite int                      `json:"width_at_write"`
	// States are the exported keyed states (ids are the source's).
	States []snapshotfmt.State `json:"states"`
	// Filter describes a partial export; import refuses nothing for it but
	// reports it.
	Filter ExportFilter `json:"filter"`
	// PartitionBy is "", "state" or "bucket".
	PartitionBy string `json:"partition_by,omitempty"`
	// WorkerStateFile is the per-worker state file, relative to the export
	// (a sibling file name, or a name inside the directory); empty when the
	// snapshot has none.
	WorkerStateFile string `json:"worker_state_file,omitempty"`
	// WorkerStates lists the per-worker states in manifest order with their
	// rule, so workers without items survive the trip.
	WorkerStates []WorkerStateMeta `json:"worker_states,omitempty"`
}

// ExportFilter is the part of the snapshot exported.
type ExportFilter struct {
	States   []string `json:"states,omitempty"`
	BucketLo *uint32  `json:"bucket_lo,omitempty"`
	BucketHi *uint32  `json:"bucket_hi,omitempty"`
	Worker   *int     `json:"worker,omitempty"`
	Width    int      `json:"width,omitempty"`
}

// Partial reports whether the export left anything out.
func (f ExportFilter) Partial() bool {
	return len(f.States) > 0 || f.BucketLo != nil || f.Width > 0
}

// WorkerStateMeta is one per-worker state of an export.
type WorkerStateMeta struct {
	Step  string           `json:"step"`
	Name  string           `json:"name"`
	Rule  snapshotfmt.Rule `json:"rule"`
	Width int              `json:"width"`
}

// Columns of the per-worker state table.
const (
	WColStep   = "step"
	WColName   = "name"
	WColRule   = "rule"
	WColWorker = "worker"
	WColItem   = "item"
	WColValue  = "value"
)

func decodeExportMeta(s string) (*ExportMeta, error) {
	var em ExportMeta
	if err := json.Unmarshal([]byte(s), &em); err != nil {
		return nil, fmt.Errorf("%w: metadata %s is not valid JSON: %v", snapshotfmt.ErrCorrupt, MetaExport, err)
	}
	if em.Version != 1 {
		return nil, fmt.Errorf("%w: metadata %s version %d; this build reads 1", snapshotfmt.ErrUnsupported, MetaExport, em.Version)
	}
	return &em, nil
}
