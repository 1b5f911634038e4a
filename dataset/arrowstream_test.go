package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/ipc"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// toStream rewrites an Arrow IPC file in the stream format (metadata kept).
func toStream(t *testing.T, in, out string) {
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
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	w := ipc.NewWriter(o, ipc.WithSchema(r.Schema()))
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordAt(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// import reads the Arrow IPC stream format as well as the file format
// (issue 15 item 2); a stream cut short is damage, not fewer rows.
func TestImportArrowStream(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 4, Width: 2, Keys: 300, SubKeys: 2})
	exp := filepath.Join(dir, "x.arrow")
	if _, err := dataset.Export(ctx, s, exp, dataset.ExportOptions{Format: dataset.Arrow}); err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(dir, "x.arrows")
	toStream(t, exp, stream)
	back := filepath.Join(dir, "back")
	res, err := dataset.Import(ctx, stream, back, dataset.ImportOptions{Buckets: 3, WorkerState: filepath.Join(dir, "x.workers.arrow")})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsDeclared != s.Manifest().TotalEntries() || res.StatesFrom != "export metadata" {
		t.Fatalf("stream import: %+v", res)
	}
	assertEqual(t, back, src)

	b, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.arrows")
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Import(ctx, cut, filepath.Join(dir, "cut"), dataset.ImportOptions{Buckets: 3, WorkerState: filepath.Join(dir, "x.workers.arrow")}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("a stream cut short: %v, want ErrCorrupt", err)
	}
}
