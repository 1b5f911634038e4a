package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// MinImportMemory is the smallest sort budget import accepts: below it the
// sort would spill a run every few rows (one per row at 1 byte). It is low
// enough for tests to force spills.
const MinImportMemory = 64 << 10

// Everything an import reads from a file's metadata is untrusted: a crafted
// or damaged dataset must not make import read outside the dataset, nor
// reorder, retype or invent state. The checks below are the import's side
// of that; nothing here quotes bytes of a file that is not a valid input.

// metaPathInside resolves rel, a path from an export's metadata, against
// the dataset directory base. It must be a relative path without "..",
// and must resolve (symbolic links followed) to an entry inside base;
// anything else is refused with ErrInvalidArgument.
func metaPathInside(base, rel string) (string, error) {
	shown := clip(rel)
	bad := func(why string) error {
		return fmt.Errorf("%w: the export's metadata names the per-worker state file %q, %s; refused (pass --worker-state FILE to name the table)", snapshotfmt.ErrInvalidArgument, shown, why)
	}
	if rel == "" || !filepath.IsLocal(rel) || slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), "..") {
		return "", bad("which is not a relative path inside the dataset directory")
	}
	p := filepath.Join(base, rel)
	if _, err := os.Lstat(p); err != nil {
		return "", fmt.Errorf("%w: the export's metadata names the per-worker state file %s, which cannot be read (%v); copy it beside the data or pass --worker-state", snapshotfmt.ErrInvalidArgument, p, errors.Unwrap(err))
	}
	root, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", fmt.Errorf("dataset directory %s: %w", base, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", bad(fmt.Sprintf("a symbolic link that does not resolve (%v)", errors.Unwrap(err)))
	}
	if r, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(r) {
		return "", bad("a symbolic link to outside the dataset directory " + root)
	}
	return real, nil
}

// emptyExportMeta opens the per-worker state file of a dataset directory
// without data files (an export of an empty snapshot), for its metadata;
// nil when there is none.
func emptyExportMeta(dir string) (part, error) {
	// Today's place first, then where older exports put it.
	for _, name := range []string{workerStateRel(Parquet), workerStateRel(Arrow), "_worker_state" + Parquet.Ext(), "_worker_state" + Arrow.Ext()} {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		p, err := metaPathInside(dir, name)
		if err != nil {
			return nil, err
		}
		pt, err := openPart(p)
		if err != nil {
			return nil, err
		}
		if _, ok := pt.meta()[MetaExport]; !ok {
			pt.close()
			return nil, nil
		}
		return pt, nil
	}
	return nil, nil
}

// checkExportMeta validates the numbers of an export's metadata, against
// the source manifest it carries when there is one (m, already decoded and
// validated). Violations are ErrCorrupt: the dataset is damaged or crafted.
func checkExportMeta(em *ExportMeta, m *snapshotfmt.Manifest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: metadata %s: %s", snapshotfmt.ErrCorrupt, MetaExport, fmt.Sprintf(format, args...))
	}
	if err := em.Partitioning.Validate(); err != nil {
		return bad("partitioning: %v", err)
	}
	if em.WidthAtWrite < 1 || em.WidthAtWrite > snapshotfmt.MaxBuckets*16 {
		return bad("width_at_write %d outside 1..%d", em.WidthAtWrite, snapshotfmt.MaxBuckets*16)
	}
	switch em.PartitionBy {
	case "", "state", "bucket":
	default:
		return bad("partition_by %q, want state or bucket", clip(em.PartitionBy))
	}
	if len(em.States) > 1<<16-1 || len(em.WorkerStates) > 1<<16-1 {
		return bad("%d states and %d per-worker states, over 65535", len(em.States), len(em.WorkerStates))
	}
	seen := map[string]bool{}
	for i, ws := range em.WorkerStates {
		q := ws.Step + "/" + ws.Name
		switch {
		case seen[q]:
			return bad("worker_states[%d]: %s listed twice", i, q)
		case ws.Rule != snapshotfmt.RuleSplit && ws.Rule != snapshotfmt.RuleUnion && ws.Rule != snapshotfmt.RuleBroadcast:
			return bad("worker_states[%d] (%s): rule %q, want split, union or broadcast", i, clip(q), clip(string(ws.Rule)))
		case ws.Width != em.WidthAtWrite:
			// A snapshot has one file per worker at its width at write; any
			// other width would deal the items to other workers.
			return bad("worker_states[%d] (%s): width %d, but width_at_write is %d", i, q, ws.Width, em.WidthAtWrite)
		}
		seen[q] = true
	}
	if m == nil {
		return nil
	}
	if em.WidthAtWrite != m.WidthAtWrite {
		return bad("width_at_write %d, the source manifest says %d", em.WidthAtWrite, m.WidthAtWrite)
	}
	if em.Partitioning != m.Partitioning {
		return bad("partitioning %s, the source manifest says %s", em.Partitioning, m.Partitioning)
	}
	for i, st := range em.States {
		ms, ok := m.StateByID(st.ID)
		switch {
		case !ok:
			return bad("states[%d] (%s): id %d is not in the source manifest", i, st.QualifiedName(), st.ID)
		case ms.Step != st.Step || ms.Name != st.Name:
			return bad("states[%d]: id %d is %s, the source manifest's is %s", i, st.ID, st.QualifiedName(), ms.QualifiedName())
		case ms.Kind != st.Kind:
			return bad("states[%d] (%s): kind %s, the source manifest says %s", i, st.QualifiedName(), st.Kind, ms.Kind)
		case ms.KeyCodec != st.KeyCodec || ms.SubKeyCodec != st.SubKeyCodec || ms.ValueCodec != st.ValueCodec:
			return bad("states[%d] (%s): codecs differ from the source manifest's", i, st.QualifiedName())
		}
	}
	if len(em.WorkerStates) != len(m.WorkerStates) {
		return bad("%d per-worker states, the source manifest has %d", len(em.WorkerStates), len(m.WorkerStates))
	}
	for i, ws := range em.WorkerStates {
		mw := m.WorkerStates[i]
		if ws.Step != mw.Step || ws.Name != mw.Name || ws.Rule != mw.Rule {
			return bad("worker_states[%d]: %s/%s rule %s, the source manifest has %s rule %s", i, ws.Step, ws.Name, ws.Rule, mw.QualifiedName(), mw.Rule)
		}
	}
	return nil
}

// checkItems checks that b is an item encoding (FORMAT.md section 5), the
// value of a list state, without allocating.
func checkItems(b []byte) error {
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return fmt.Errorf("%d trailing bytes at offset %d", len(b)-off, off)
		}
		n := binary.BigEndian.Uint32(b[off:])
		off += 4
		if uint64(n) > uint64(len(b)-off) {
			return fmt.Errorf("the item at offset %d claims %d bytes, %d remain", off-4, n, len(b)-off)
		}
		off += int(n)
	}
	return nil
}

// workerExpect is what an export's metadata says of its per-worker state
// table.
type workerExpect struct {
	meta  []WorkerStateMeta
	width int
	// own: the table is the one the metadata names (not --worker-state).
	own bool
	// manifest, when set, gives the item count of every worker.
	manifest *snapshotfmt.Manifest
}

// wholeExport reports whether the dataset at src is an export as written
// (the file of an unpartitioned export, or the directory of a partitioned
// one), not a part of one: then its rows must add up to the source
// manifest's entries.
func wholeExport(src string, inputs []inputFile, em *ExportMeta) bool {
	st, err := os.Stat(src)
	if err != nil {
		return false
	}
	if em.PartitionBy == "" {
		return !st.IsDir()
	}
	if !st.IsDir() {
		return false
	}
	keys := []string{"bucket"}
	if em.PartitionBy == "state" {
		keys = []string{"step", "state"}
	}
	for _, in := range inputs {
		for _, k := range keys {
			if _, ok := in.hive[k]; !ok {
				return false
			}
		}
	}
	return true
}
