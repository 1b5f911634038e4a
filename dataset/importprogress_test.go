package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/snapshotfmt"
)

type phase struct {
	what  string
	unit  progress.Unit
	total int64
	added int64
}

type recorder struct {
	mu     sync.Mutex
	phases []*phase
}

func (r *recorder) Start(total int64, what string) { r.StartUnit(total, what, progress.Bytes) }
func (r *recorder) StartUnit(total int64, what string, u progress.Unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phases = append(r.phases, &phase{what: what, unit: u, total: total})
}
func (r *recorder) Add(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.phases) > 0 {
		r.phases[len(r.phases)-1].added += n
	}
}
func (r *recorder) Finish() {}

// Issue 15 item 6: import's read phase is a bar of rows with the declared
// row count as its total (it was a spinner of bytes without a total).
func TestImportReadProgressRows(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 3000, SubKeys: 2})
	ds := filepath.Join(dir, "ds")
	if _, err := dataset.Export(ctx, s, ds, dataset.ExportOptions{PartitionBy: "bucket"}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	res, err := dataset.Import(ctx, ds, filepath.Join(dir, "out"), dataset.ImportOptions{Buckets: 3, Progress: rec})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.phases) == 0 {
		t.Fatal("no progress")
	}
	read := rec.phases[0]
	rows := int64(s.Manifest().TotalEntries())
	if read.what != "import: read" || read.unit != progress.Rows || read.total != rows || read.added != rows || int64(res.RowsDeclared) != rows {
		t.Fatalf("read phase %+v, want %q in rows with total and count %d", *read, "import: read", rows)
	}
}

// import --dry-run: the checks and the plan, nothing read past the headers
// and nothing written; the refusals the real run would give.
func TestImportDryRun(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 4, Width: 2, Keys: 200, SubKeys: 2})
	exp := filepath.Join(dir, "x.parquet")
	if _, err := dataset.Export(ctx, s, exp, dataset.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	res, err := dataset.Import(ctx, exp, out, dataset.ImportOptions{Buckets: 8, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.RowsDeclared != s.Manifest().TotalEntries() || len(res.States) != len(s.Manifest().States) || len(res.WorkerStates) != 2 || res.Width != 2 {
		t.Fatalf("dry run plan: %+v", res)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run wrote %s", out)
	}
	// The target check of the real run: an existing snapshot without --force.
	if _, err := dataset.Import(ctx, exp, src, dataset.ImportOptions{Buckets: 8, DryRun: true}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("dry run into an existing snapshot: %v, want a refusal", err)
	}
	// A dataset without metadata: refused as the real run would be.
	plainDir := filepath.Join(dir, "plain")
	os.Mkdir(plainDir, 0o755)
	arrowExp := filepath.Join(dir, "y.arrow")
	if _, err := dataset.Export(ctx, s, arrowExp, dataset.ExportOptions{Format: dataset.Arrow}); err != nil {
		t.Fatal(err)
	}
	stripMetadata(t, arrowExp, filepath.Join(plainDir, "p.arrow"))
	if _, err := dataset.Import(ctx, plainDir, out, dataset.ImportOptions{Buckets: 8, DryRun: true}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("dry run without metadata: %v, want a refusal", err)
	}
}
