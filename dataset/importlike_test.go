package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// stripMetadata copies an Arrow IPC file without its schema metadata, as a
// tool that rewrites the table (DuckDB's COPY) leaves it.
func stripMetadata(t *testing.T, in, out string) {
	t.Helper()
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	schema := arrow.NewSchema(r.Schema().Fields(), nil)
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	w, err := ipc.NewFileWriter(o, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordAt(i)
		if err != nil {
			t.Fatal(err)
		}
		nr := array.NewRecord(schema, rec.Columns(), rec.NumRows())
		if err := w.Write(nr); err != nil {
			t.Fatal(err)
		}
		nr.Release()
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Issue 15 item 2: a dataset that lost rebucket's metadata imported with
// exit 0 but a list state became a value state, codecs went, per-worker
// state (source offsets) was dropped and the width became 1. Now it is
// refused unless the caller says where these come from.
func TestImportWithoutMetadata(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 4, Width: 2, Keys: 100, SubKeys: 2})
	exp := filepath.Join(dir, "x.arrow")
	if _, err := dataset.Export(ctx, s, exp, dataset.ExportOptions{Format: dataset.Arrow}); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.arrow")
	stripMetadata(t, exp, plain)

	_, err := dataset.Import(ctx, plain, filepath.Join(dir, "refused"), dataset.ImportOptions{Buckets: 3})
	if !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("import without metadata or --like/--states: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "refused")); err == nil {
		t.Fatal("the refused import wrote its output")
	}
	// --states alone leaves per-worker state unsaid: refused too.
	states := s.Manifest().States
	if _, err := dataset.Import(ctx, plain, filepath.Join(dir, "r2"), dataset.ImportOptions{Buckets: 3, States: states}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("--states without --worker-state or --no-worker-state: %v, want a refusal", err)
	}

	// --like: states, kinds, codecs, width and per-worker state as the source's.
	back := filepath.Join(dir, "like")
	res, err := dataset.Import(ctx, plain, back, dataset.ImportOptions{Buckets: 4, Like: src})
	if err != nil {
		t.Fatal(err)
	}
	if res.Width != s.Manifest().WidthAtWrite || len(res.WorkerStates) != len(s.Manifest().WorkerStates) {
		t.Fatalf("--like: width %d, worker states %v; want %d and %d", res.Width, res.WorkerStates, s.Manifest().WidthAtWrite, len(s.Manifest().WorkerStates))
	}
	for i, st := range res.States {
		w := states[i]
		if st.Kind != w.Kind || st.KeyCodec != w.KeyCodec || st.SubKeyCodec != w.SubKeyCodec || st.ValueCodec != w.ValueCodec {
			t.Fatalf("--like: state %s is %+v, want %+v", st.QualifiedName(), st, w)
		}
	}
	assertEqual(t, back, src)

	// --states with an explicit --no-worker-state.
	res, err = dataset.Import(ctx, plain, filepath.Join(dir, "nows"), dataset.ImportOptions{Buckets: 4, States: states, NoWorkerState: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.WorkerStates) != 0 || res.StatesFrom != "states file" {
		t.Fatalf("--no-worker-state: %+v", res)
	}
}
