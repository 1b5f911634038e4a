package dataset

// Hostile and lying inputs of import (issue 14, items 3, 4 and 6): every
// row a file declares is read or the import fails; nothing under a dataset
// is skipped silently; paths and numbers from metadata are checked; a FIFO
// or device never blocks; no error quotes the bytes of a file that is not
// a valid input.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

var hctx = context.Background()

type hRow struct {
	Step  string `parquet:"step"`
	State string `parquet:"state"`
	Key   []byte `parquet:"key"`
	Value []byte `parquet:"value"`
}

// hRows are n distinct rows of one value state, keys from first on.
func hRows(first, n int) []hRow {
	rows := make([]hRow, n)
	for i := range rows {
		rows[i] = hRow{"s", "v", []byte(fmt.Sprintf("k%06d", first+i)), []byte("v")}
	}
	return rows
}

// writeGroups writes rows as a Parquet file of row groups of group rows.
func writeGroups(t *testing.T, p string, rows []hRow, group int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[hRow](f, parquet.MaxRowsPerRowGroup(group))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// editFooter rewrites the footer of the Parquet file at p through edit.
func editFooter(t *testing.T, p string, edit func(md *format.FileMetaData, size int64)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	body := data[:len(data)-8-n]
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(body):len(data)-8], &md); err != nil {
		t.Fatal(err)
	}
	edit(&md, int64(len(data)))
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), body...), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pastEnd moves the column chunks of row group g beyond the end of the file.
func pastEnd(md *format.FileMetaData, g int, size int64) {
	for j := range md.RowGroups[g].Columns {
		cm := &md.RowGroups[g].Columns[j].MetaData
		if cm.DictionaryPageOffset > 0 {
			cm.DictionaryPageOffset += size
		}
		cm.DataPageOffset += size
	}
}

// importErr imports src and returns the error, failing the test if the
// import does not return within a few seconds (a blocking open) or if a
// failed import left its output.
func importErr(t *testing.T, src string, opts ImportOptions) (*ImportResult, error) {
	t.Helper()
	if opts.Buckets == 0 {
		opts.Buckets = 4
	}
	out := filepath.Join(t.TempDir(), "out")
	type result struct {
		res *ImportResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := Import(hctx, src, out, opts)
		done <- result{r, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed import left %s", out)
			}
		}
		return r.res, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("import of %s did not return (blocked in open?)", src)
		return nil, nil
	}
}

func wantErr(t *testing.T, err error, class error, want ...string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v, want %v", err, class)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// A Parquet file whose footer lies: every declared row is read or the
// import fails naming file and row group. Before: one row group's chunks
// past the end imported as 900 of 1000 rows, all of them as an empty
// snapshot, both with exit 0.
func TestImportLyingParquet(t *testing.T) {
	cases := []struct {
		name string
		edit func(md *format.FileMetaData, size int64)
		want []string
	}{
		{"one row group past the end", func(md *format.FileMetaData, size int64) { pastEnd(md, 3, size) }, []string{"row group 3"}},
		{"all row groups past the end", func(md *format.FileMetaData, size int64) {
			for g := range md.RowGroups {
				pastEnd(md, g, size)
			}
		}, []string{"row group 0"}},
		{"chunk size past the end", func(md *format.FileMetaData, size int64) {
			md.RowGroups[9].Columns[2].MetaData.TotalCompressedSize += size
		}, []string{"row group 9"}},
		{"footer declares more rows", func(md *format.FileMetaData, size int64) { md.NumRows = 1100 }, []string{"declares 1100 rows"}},
		{"row group declares more rows", func(md *format.FileMetaData, size int64) {
			md.RowGroups[4].NumRows += 50
			md.NumRows += 50
		}, []string{"row group 4", "150"}},
		{"row group declares fewer rows", func(md *format.FileMetaData, size int64) {
			md.RowGroups[4].NumRows -= 50
			md.NumRows -= 50
		}, []string{"row group 4"}},
		{"chunk in another file", func(md *format.FileMetaData, size int64) {
			md.RowGroups[1].Columns[0].FilePath = "../secret.parquet"
		}, []string{"row group 1", "another file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "lying.parquet")
			writeGroups(t, p, hRows(0, 1000), 100)
			editFooter(t, p, c.edit)
			res, err := importErr(t, p, ImportOptions{InferStates: true})
			if err == nil {
				t.Fatalf("imported %d of %d declared rows with no error", res.RowsRead, res.RowsDeclared)
			}
			wantErr(t, err, snapshotfmt.ErrCorrupt, append([]string{p}, c.want...)...)
		})
	}
	// The untouched file imports, and says what it declared and read.
	p := filepath.Join(t.TempDir(), "fine.parquet")
	writeGroups(t, p, hRows(0, 1000), 100)
	res, err := importErr(t, p, ImportOptions{InferStates: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsDeclared != 1000 || res.RowsRead != 1000 || res.Rows != 1000 || res.Entries != 1000 {
		t.Fatalf("declared %d, read %d, rows %d, entries %d", res.RowsDeclared, res.RowsRead, res.Rows, res.Entries)
	}
}

// writeArrowBatches writes rows as an Arrow IPC file of batches of n rows.
func writeArrowBatches(t *testing.T, p string, rows []hRow, n int) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "step", Type: arrow.BinaryTypes.String}, {Name: "state", Type: arrow.BinaryTypes.String},
		{Name: "key", Type: arrow.BinaryTypes.Binary}, {Name: "value", Type: arrow.BinaryTypes.Binary},
	}, nil)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.Step)
		b.Field(1).(*array.StringBuilder).Append(r.State)
		b.Field(2).(*array.BinaryBuilder).Append(r.Key)
		b.Field(3).(*array.BinaryBuilder).Append(r.Value)
		if (i+1)%n == 0 || i == len(rows)-1 {
			rec := b.NewRecord()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	b.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// editArrowBlock rewrites record batch block i of the Arrow file at p.
func editArrowBlock(t *testing.T, p string, i int, edit func(off, meta, body *int64, size int64)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	n := int(binary.LittleEndian.Uint32(data[len(data)-10:]))
	v := fbVerifier{b: data[len(data)-10-n : len(data)-10]}
	footer, ok := v.root()
	if !ok {
		t.Fatal("no footer root")
	}
	start, cnt, ok := v.vector(footer, 3, 24)
	if !ok || i >= cnt {
		t.Fatalf("%d record batches", cnt)
	}
	b := v.b[start+24*i:]
	off, meta, body := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint32(b[8:])), int64(binary.LittleEndian.Uint64(b[16:]))
	edit(&off, &meta, &body, size)
	binary.LittleEndian.PutUint64(b, uint64(off))
	binary.LittleEndian.PutUint32(b[8:], uint32(meta))
	binary.LittleEndian.PutUint64(b[16:], uint64(body))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Truncated and lying Arrow IPC files fail; none imports part of its rows.
func TestImportLyingArrow(t *testing.T) {
	cases := []struct {
		name string
		edit func(off, meta, body *int64, size int64)
		want string
	}{
		{"batch past the end", func(off, meta, body *int64, size int64) { *off += size }, "record batch 3"},
		{"body past the end", func(off, meta, body *int64, size int64) { *body += size }, "record batch 3"},
		{"body cut short", func(off, meta, body *int64, size int64) { *body /= 2 }, "record batch 3"},
		{"batch pointing at another", func(off, meta, body *int64, size int64) { *off -= 8 }, "record batch 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "lying.arrow")
			writeArrowBatches(t, p, hRows(0, 1000), 100)
			editArrowBlock(t, p, 3, c.edit)
			res, err := importErr(t, p, ImportOptions{InferStates: true})
			if err == nil {
				t.Fatalf("imported %d of %d declared rows with no error", res.RowsRead, res.RowsDeclared)
			}
			wantErr(t, err, snapshotfmt.ErrCorrupt, p, c.want)
		})
	}
	p := filepath.Join(t.TempDir(), "fine.arrow")
	writeArrowBatches(t, p, hRows(0, 1000), 100)
	res, err := importErr(t, p, ImportOptions{InferStates: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsDeclared != 1000 || res.RowsRead != 1000 || res.Entries != 1000 {
		t.Fatalf("declared %d, read %d, entries %d", res.RowsDeclared, res.RowsRead, res.Entries)
	}
	// Cut anywhere, with or without its footer, a file fails.
	data, _ := os.ReadFile(p)
	for _, cut := range []int{len(data) - 1, len(data) - 10, len(data) / 2, 100} {
		q := filepath.Join(t.TempDir(), "cut.arrow")
		os.WriteFile(q, data[:cut], 0o644)
		if _, err := importErr(t, q, ImportOptions{InferStates: true}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Errorf("cut at %d of %d: %v", cut, len(data), err)
		}
	}
}

// Nothing under a dataset directory is skipped silently. A part file that
// is a symbolic link is followed when it resolves inside the dataset and
// refused otherwise (before: skipped without a word, 1000 of 1500 rows); a
// FIFO, a device or a socket is refused, promptly.
func TestImportDatasetEntries(t *testing.T) {
	setup := func(t *testing.T) (root, ds string) {
		root = t.TempDir()
		ds = filepath.Join(root, "ds")
		os.MkdirAll(filepath.Join(ds, "_store"), 0o755)
		writeGroups(t, filepath.Join(ds, "part-0.parquet"), hRows(0, 1000), 1000)
		writeGroups(t, filepath.Join(ds, "_store", "p.parquet"), hRows(1000, 500), 500)
		os.MkdirAll(filepath.Join(root, "other"), 0o755)
		writeGroups(t, filepath.Join(root, "other", "p.parquet"), hRows(1000, 500), 500)
		return root, ds
	}
	t.Run("link inside is followed", func(t *testing.T) {
		_, ds := setup(t)
		hmust(t, os.Symlink(filepath.Join("_store", "p.parquet"), filepath.Join(ds, "part-1.parquet")))
		res, err := importErr(t, ds, ImportOptions{InferStates: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.RowsRead != 1500 || res.RowsDeclared != 1500 || len(res.Inputs) != 2 {
			t.Fatalf("read %d of %d declared rows from %v", res.RowsRead, res.RowsDeclared, res.Inputs)
		}
		// What the _ and . convention leaves out is said.
		if len(res.Ignored) != 1 || filepath.Base(res.Ignored[0]) != "_store" {
			t.Fatalf("ignored %v", res.Ignored)
		}
	})
	t.Run("link outside is refused", func(t *testing.T) {
		root, ds := setup(t)
		link := filepath.Join(ds, "part-1.parquet")
		hmust(t, os.Symlink(filepath.Join(root, "other", "p.parquet"), link))
		_, err := importErr(t, ds, ImportOptions{InferStates: true})
		wantErr(t, err, snapshotfmt.ErrInvalidArgument, link, "outside the dataset")
	})
	t.Run("dangling link is refused", func(t *testing.T) {
		_, ds := setup(t)
		link := filepath.Join(ds, "part-1.parquet")
		hmust(t, os.Symlink("nowhere.parquet", link))
		_, err := importErr(t, ds, ImportOptions{InferStates: true})
		wantErr(t, err, snapshotfmt.ErrInvalidArgument, link)
	})
	t.Run("link to a directory is refused", func(t *testing.T) {
		_, ds := setup(t)
		link := filepath.Join(ds, "part-1")
		hmust(t, os.Symlink("_store", link))
		_, err := importErr(t, ds, ImportOptions{InferStates: true})
		wantErr(t, err, snapshotfmt.ErrInvalidArgument, link, "directory")
	})
	t.Run("fifo is refused", func(t *testing.T) {
		_, ds := setup(t)
		fifo := filepath.Join(ds, "part-1.parquet")
		hmust(t, syscall.Mkfifo(fifo, 0o644))
		_, err := importErr(t, ds, ImportOptions{InferStates: true})
		wantErr(t, err, snapshotfmt.ErrInvalidArgument, fifo, "FIFO")
	})
	t.Run("link to a device is refused", func(t *testing.T) {
		_, ds := setup(t)
		link := filepath.Join(ds, "part-1.parquet")
		hmust(t, os.Symlink("/dev/null", link))
		_, err := importErr(t, ds, ImportOptions{InferStates: true})
		wantErr(t, err, snapshotfmt.ErrInvalidArgument, link)
	})
}

// A FIFO or device named as the dataset, or as --worker-state, is refused
// at once (before: open(2) blocked past SIGTERM).
func TestImportSpecialFileInputs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.parquet")
	hmust(t, syscall.Mkfifo(fifo, 0o644))
	good := filepath.Join(dir, "good.parquet")
	writeGroups(t, good, hRows(0, 10), 10)
	_, err := importErr(t, fifo, ImportOptions{InferStates: true})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, fifo, "FIFO")
	_, err = importErr(t, "/dev/null", ImportOptions{InferStates: true})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, "/dev/null", "character device")
	_, err = importErr(t, good, ImportOptions{InferStates: true, WorkerState: fifo})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, fifo, "FIFO")
}

// exportSmall exports a generated snapshot (4 workers, per-worker state)
// to dir/ds.parquet and returns its path.
func exportSmall(t *testing.T, dir string) string {
	t.Helper()
	snap := filepath.Join(dir, "snap")
	if _, err := fixtures.Generate(hctx, snap, fixtures.Spec{Buckets: 8, Width: 4, Keys: 50, SubKeys: 2, ListLen: 2}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(snap, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "ds.parquet")
	if _, err := Export(hctx, s, ds, ExportOptions{Format: Parquet}); err != nil {
		t.Fatal(err)
	}
	return ds
}

// editMeta rewrites key-value metadata of the Parquet file at p: edit gets
// the export metadata decoded, and may drop the embedded manifest.
func editMeta(t *testing.T, p string, edit func(em map[string]any, kv map[string]string)) {
	t.Helper()
	editFooter(t, p, func(md *format.FileMetaData, _ int64) {
		kv := map[string]string{}
		for _, e := range md.KeyValueMetadata {
			kv[e.Key] = e.Value
		}
		var em map[string]any
		hmust(t, json.Unmarshal([]byte(kv[MetaExport]), &em))
		edit(em, kv)
		b, err := json.Marshal(em)
		hmust(t, err)
		kv[MetaExport] = string(b)
		md.KeyValueMetadata = nil
		for k, v := range kv {
			md.KeyValueMetadata = append(md.KeyValueMetadata, format.KeyValue{Key: k, Value: v})
		}
	})
}

// Paths from a dataset's metadata resolve inside the dataset directory or
// are refused; errors never quote a file that is not a valid input.
// Before: worker_state_file ../secret/... was read into the new snapshot
// (exit 0), and a non-Parquet file's first bytes were printed.
func TestImportMetadataPaths(t *testing.T) {
	const secret = "TOPSECRET-root:$6$ZQXJ"
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, ds string) string // worker_state_file
		class error
		want  string
	}{
		{"dotdot", func(t *testing.T, dir, ds string) string {
			os.MkdirAll(filepath.Join(dir, "secret"), 0o755)
			data, _ := os.ReadFile(filepath.Join(dir, "ds.workers.parquet"))
			os.WriteFile(filepath.Join(dir, "secret", "s.workers.parquet"), data, 0o644)
			return "../secret/s.workers.parquet"
		}, snapshotfmt.ErrInvalidArgument, "not a relative path inside"},
		{"deep dotdot", func(t *testing.T, dir, ds string) string { return "../../../../../../etc/passwd" }, snapshotfmt.ErrInvalidArgument, "not a relative path inside"},
		{"absolute", func(t *testing.T, dir, ds string) string { return "/etc/passwd" }, snapshotfmt.ErrInvalidArgument, "not a relative path inside"},
		{"inner dotdot", func(t *testing.T, dir, ds string) string { return "x/../ds.workers.parquet" }, snapshotfmt.ErrInvalidArgument, "not a relative path inside"},
		{"link out", func(t *testing.T, dir, ds string) string {
			out := t.TempDir()
			data, _ := os.ReadFile(filepath.Join(dir, "ds.workers.parquet"))
			os.WriteFile(filepath.Join(out, "w.parquet"), data, 0o644)
			hmust(t, os.Symlink(filepath.Join(out, "w.parquet"), filepath.Join(dir, "l.workers.parquet")))
			return "l.workers.parquet"
		}, snapshotfmt.ErrInvalidArgument, "outside the dataset directory"},
		{"not a table", func(t *testing.T, dir, ds string) string {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(secret+"\n"), 0o644)
			return "notes.txt"
		}, snapshotfmt.ErrCorrupt, "not a Parquet or Arrow IPC file"},
		{"parquet-looking", func(t *testing.T, dir, ds string) string {
			os.WriteFile(filepath.Join(dir, "fake.parquet"), []byte("PAR1"+secret+"X"+secret), 0o644)
			return "fake.parquet"
		}, snapshotfmt.ErrCorrupt, "fake.parquet"},
		{"fifo", func(t *testing.T, dir, ds string) string {
			hmust(t, syscall.Mkfifo(filepath.Join(dir, "f.workers.parquet"), 0o644))
			return "f.workers.parquet"
		}, snapshotfmt.ErrInvalidArgument, "FIFO"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ds := exportSmall(t, dir)
			wsf := c.setup(t, dir, ds)
			editMeta(t, ds, func(em map[string]any, _ map[string]string) { em["worker_state_file"] = wsf })
			res, err := importErr(t, ds, ImportOptions{InferStates: true})
			if err == nil {
				t.Fatalf("imported with worker state from %s", res.WorkerSource)
			}
			wantErr(t, err, c.class, c.want)
			if strings.Contains(err.Error(), "TOPSEC") || strings.Contains(err.Error(), "ZQXJ") || strings.Contains(err.Error(), "root:") {
				t.Errorf("error quotes the file: %v", err)
			}
		})
	}
	// A link to a file inside the dataset directory is followed.
	dir := t.TempDir()
	ds := exportSmall(t, dir)
	hmust(t, os.Symlink("ds.workers.parquet", filepath.Join(dir, "l.workers.parquet")))
	editMeta(t, ds, func(em map[string]any, _ map[string]string) { em["worker_state_file"] = "l.workers.parquet" })
	res, err := importErr(t, ds, ImportOptions{InferStates: true})
	if err != nil || len(res.WorkerStates) == 0 {
		t.Fatalf("link inside: %v", err)
	}
}

// Numbers from the metadata are checked, not trusted: against the source
// manifest the export embeds, and against the rows.
func TestImportMetadataNumbers(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(em map[string]any, kv map[string]string)
		class error
		want  string
	}{
		{"width_at_write 10^6", func(em map[string]any, _ map[string]string) { em["width_at_write"] = 1000000 }, snapshotfmt.ErrCorrupt, "width_at_write"},
		{"width_at_write 10^7", func(em map[string]any, kv map[string]string) {
			em["width_at_write"] = 10000000
			delete(kv, MetaManifest)
		}, snapshotfmt.ErrCorrupt, "width_at_write"},
		{"worker-state width", func(em map[string]any, _ map[string]string) {
			em["worker_states"].([]any)[0].(map[string]any)["width"] = 6
		}, snapshotfmt.ErrCorrupt, "width 6"},
		{"worker-state width, no manifest", func(em map[string]any, kv map[string]string) {
			em["worker_states"].([]any)[0].(map[string]any)["width"] = 6
			delete(kv, MetaManifest)
		}, snapshotfmt.ErrCorrupt, "width 6"},
		{"worker-state rule", func(em map[string]any, _ map[string]string) {
			ws := em["worker_states"].([]any)[0].(map[string]any)
			if ws["rule"] == "union" {
				ws["rule"] = "split"
			} else {
				ws["rule"] = "union"
			}
		}, snapshotfmt.ErrCorrupt, "rule"},
		{"value state re-typed as list", func(em map[string]any, _ map[string]string) {
			for _, s := range em["states"].([]any) {
				if st := s.(map[string]any); st["kind"] == "value" {
					st["kind"] = "list"
					return
				}
			}
			t.Fatal("no value state")
		}, snapshotfmt.ErrCorrupt, "kind list"},
		{"value state re-typed as list, no manifest", func(em map[string]any, kv map[string]string) {
			delete(kv, MetaManifest)
			for _, s := range em["states"].([]any) {
				if st := s.(map[string]any); st["kind"] == "value" {
					st["kind"] = "list"
					return
				}
			}
		}, snapshotfmt.ErrInvalidArgument, "not a list's item encoding"},
		{"embedded manifest edited", func(em map[string]any, kv map[string]string) {
			kv[MetaManifest] = strings.Replace(kv[MetaManifest], `"width_at_write": 4`, `"width_at_write": 5`, 1)
		}, snapshotfmt.ErrCorrupt, MetaManifest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ds := exportSmall(t, dir)
			editMeta(t, ds, c.edit)
			_, err := importErr(t, ds, ImportOptions{InferStates: true, Buckets: 4})
			wantErr(t, err, c.class, c.want)
		})
	}
}

// A per-worker state table whose rows disagree with the metadata (a worker
// past the width, an item index repeated or skipped, an item count unlike
// the source manifest's) is refused, not re-dealt.
func TestImportWorkerRows(t *testing.T) {
	type wrow struct {
		Step   string `parquet:"step"`
		Name   string `parquet:"name"`
		Rule   string `parquet:"rule"`
		Worker int32  `parquet:"worker"`
		Item   int32  `parquet:"item"`
		Value  []byte `parquet:"value"`
	}
	dir := t.TempDir()
	ds := exportSmall(t, dir)
	wpath := filepath.Join(dir, "ds.workers.parquet")
	pf, err := parquet.ReadFile[wrow](wpath)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf) < 4 {
		t.Fatalf("%d worker rows", len(pf))
	}
	f, err := os.Open(wpath)
	hmust(t, err)
	st, _ := f.Stat()
	pfile, err := parquet.OpenFile(f, st.Size())
	hmust(t, err)
	kv := pfile.Metadata().KeyValueMetadata
	f.Close()
	write := func(t *testing.T, rows []wrow) {
		t.Helper()
		out, err := os.Create(wpath)
		hmust(t, err)
		var opts []parquet.WriterOption
		for _, e := range kv {
			opts = append(opts, parquet.KeyValueMetadata(e.Key, e.Value))
		}
		w := parquet.NewGenericWriter[wrow](out, opts...)
		_, err = w.Write(rows)
		hmust(t, err)
		hmust(t, w.Close())
		hmust(t, out.Close())
	}
	cases := []struct {
		name string
		edit func(rows []wrow) []wrow
		want string
	}{
		{"worker past the width", func(r []wrow) []wrow { r[0].Worker = 7; return r }, "width is 4"},
		{"item index repeated", func(r []wrow) []wrow {
			for i := 1; i < len(r); i++ {
				if r[i].Worker == r[i-1].Worker && r[i].Step == r[i-1].Step && r[i].Name == r[i-1].Name {
					r[i].Item = r[i-1].Item
					return r
				}
			}
			t.Fatal("no worker with two items")
			return r
		}, "two items at index"},
		{"item index skipped", func(r []wrow) []wrow { r[0].Item += 5; return r }, "belongs"},
		{"item dropped", func(r []wrow) []wrow { return r[:len(r)-1] }, "the source manifest says"},
		{"unknown state", func(r []wrow) []wrow { r[0].Name = "other"; return r }, "not among"},
	}
	orig := append([]wrow(nil), pf...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write(t, c.edit(append([]wrow(nil), orig...)))
			_, err := importErr(t, ds, ImportOptions{InferStates: true, Buckets: 4})
			if err == nil {
				t.Fatal("imported")
			}
			if !errors.Is(err, snapshotfmt.ErrCorrupt) && !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
				t.Fatalf("error %v, want exit 2", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
	write(t, orig)
	if _, err := importErr(t, ds, ImportOptions{InferStates: true, Buckets: 4}); err != nil {
		t.Fatalf("the untouched table: %v", err)
	}
}

// --memory has a floor (before: 1 byte spilled one run per row).
func TestImportMemoryFloor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.parquet")
	writeGroups(t, p, hRows(0, 10), 10)
	_, err := importErr(t, p, ImportOptions{InferStates: true, Memory: 1})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, "floor")
	if _, err := importErr(t, p, ImportOptions{InferStates: true, Memory: MinImportMemory}); err != nil {
		t.Fatal(err)
	}
}

// --dedupe reports the rows it dropped.
func TestImportDedupeCount(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.parquet")
	rows := append(hRows(0, 100), hRows(0, 30)...)
	writeGroups(t, p, rows, 50)
	res, err := importErr(t, p, ImportOptions{InferStates: true, Dedupe: "last"})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsDeclared != 130 || res.RowsRead != 130 || res.Duplicates != 30 || res.Entries != 100 {
		t.Fatalf("declared %d, read %d, dropped %d, entries %d", res.RowsDeclared, res.RowsRead, res.Duplicates, res.Entries)
	}
}

func hmust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// emptySnapshot writes a snapshot with states but no entries, with or
// without per-worker state.
func emptySnapshot(t *testing.T, dir string, workers bool) *reader.Snapshot {
	t.Helper()
	layout, err := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 8)
	hmust(t, err)
	w, err := writer.Create(dir, writer.Header{Partitioning: layout, WidthAtWrite: 2, Tool: "test", States: []snapshotfmt.State{
		{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue},
		{ID: 2, Step: "s", Name: "m", Kind: snapshotfmt.KindMap},
	}}, writer.Options{})
	hmust(t, err)
	hmust(t, w.NewBucketWriter().Close())
	if workers {
		hmust(t, w.WriteWorkerState("src", "offsets", snapshotfmt.RuleSplit, [][][]byte{{[]byte("a")}, {[]byte("b"), []byte("c")}}))
	}
	_, err = w.Seal()
	hmust(t, err)
	hmust(t, w.Publish())
	s, err := reader.Open(dir, reader.Options{})
	hmust(t, err)
	return s
}

// An empty snapshot exported with --partition-by imports back (before: "holds
// no data files", exit 2): the export's metadata is in its per-worker state
// file. An export with neither data nor per-worker state carries no states
// table: it imports with --states, and without it the error says so.
func TestImportEmptyPartitionedExport(t *testing.T) {
	for _, by := range []string{"bucket", "state"} {
		t.Run(by, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "snap")
			s := emptySnapshot(t, src, true)
			ds := filepath.Join(dir, "ds")
			if _, err := Export(hctx, s, ds, ExportOptions{Format: Parquet, PartitionBy: by}); err != nil {
				t.Fatal(err)
			}
			back := filepath.Join(dir, "back")
			res, err := Import(hctx, ds, back, ImportOptions{InferStates: true, Buckets: 8})
			if err != nil {
				t.Fatal(err)
			}
			if res.RowsRead != 0 || res.Entries != 0 || len(res.States) != 2 || len(res.WorkerStates) != 1 || res.Width != 2 {
				t.Fatalf("%+v", res)
			}
			sum, err := verify.Equal(hctx, back, src, verify.EqualOptions{}, func(verify.Finding) {})
			if err != nil || !sum.Equal || sum.WorkerStates != 1 {
				t.Fatalf("round trip: %+v, %v", sum, err)
			}
		})
	}
	dir := t.TempDir()
	s := emptySnapshot(t, filepath.Join(dir, "snap"), false)
	ds := filepath.Join(dir, "ds")
	if _, err := Export(hctx, s, ds, ExportOptions{Format: Parquet, PartitionBy: "bucket"}); err != nil {
		t.Fatal(err)
	}
	_, err := importErr(t, ds, ImportOptions{InferStates: true, Buckets: 8})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, "no data files", "--states")
	res, err := importErr(t, ds, ImportOptions{InferStates: true, Buckets: 8, States: s.Manifest().States})
	if err != nil || res.Entries != 0 || len(res.States) != 2 {
		t.Fatalf("with the states table: %+v, %v", res, err)
	}
}

// A whole export declares its row count (its source manifest's entries): a
// part file lost from an export's directory fails the import (before: the
// rest imported, exit 0); one partition of it imports as a partial export.
func TestImportExportRowTotal(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "snap")
	if _, err := fixtures.Generate(hctx, snap, fixtures.Spec{Buckets: 8, Width: 2, Keys: 100}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(snap, reader.Options{})
	hmust(t, err)
	for _, by := range []string{"bucket", "state"} {
		t.Run(by, func(t *testing.T) {
			ds := filepath.Join(t.TempDir(), "ds")
			if _, err := Export(hctx, s, ds, ExportOptions{Format: Parquet, PartitionBy: by}); err != nil {
				t.Fatal(err)
			}
			res, err := importErr(t, ds, ImportOptions{InferStates: true})
			if err != nil || res.Partial || res.RowsRead != s.Manifest().TotalEntries() || len(res.Ignored) != 0 {
				t.Fatalf("whole export: %+v, %v", res, err)
			}
			inputs, err := listInputs(ds)
			hmust(t, err)
			if by == "bucket" {
				// One partition alone (its step and state in its
				// columns): partial, not an error.
				part := filepath.Dir(inputs[0].path)
				res, err = importErr(t, part, ImportOptions{InferStates: true, WorkerState: filepath.Join(ds, "_rebucket", "worker_state.parq")})
				if err != nil || !res.Partial {
					t.Fatalf("one partition %s: %+v, %v", part, res, err)
				}
			}
			hmust(t, os.Remove(inputs[len(inputs)-1].path))
			_, err = importErr(t, ds, ImportOptions{InferStates: true})
			wantErr(t, err, snapshotfmt.ErrCorrupt, "part files are missing")
		})
	}
}

// TestWriteHostileSeeds writes lying Parquet and Arrow files as seeds of
// FuzzImport (REBUCKET_UPDATE_TESTDATA=1).
func TestWriteHostileSeeds(t *testing.T) {
	if os.Getenv("REBUCKET_UPDATE_TESTDATA") == "" {
		t.Skip("set REBUCKET_UPDATE_TESTDATA=1 to regenerate the seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzImport")
	hmust(t, os.MkdirAll(dir, 0o755))
	seed := func(name, p string) {
		data, err := os.ReadFile(p)
		hmust(t, err)
		hmust(t, os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)), 0o644))
	}
	tmp := t.TempDir()
	p := filepath.Join(tmp, "a.parquet")
	writeGroups(t, p, hRows(0, 40), 10)
	editFooter(t, p, func(md *format.FileMetaData, size int64) { pastEnd(md, 2, size) })
	seed("lying-rowgroup-past-end", p)
	writeGroups(t, p, hRows(0, 40), 10)
	editFooter(t, p, func(md *format.FileMetaData, size int64) { md.RowGroups[1].NumRows += 5; md.NumRows += 5 })
	seed("lying-rowgroup-count", p)
	q := filepath.Join(tmp, "a.arrow")
	writeArrowBatches(t, q, hRows(0, 40), 10)
	editArrowBlock(t, q, 2, func(off, meta, body *int64, size int64) { *body /= 2 })
	seed("lying-arrow-body", q)
}

// A field quoted in an error is clipped: a megabyte-long step name does not
// make a megabyte-long message.
func TestImportErrorsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.parquet")
	writeGroups(t, p, []hRow{{strings.Repeat("x/", 500000), "v", []byte("k"), []byte("v")}}, 1)
	_, err := importErr(t, p, ImportOptions{InferStates: true})
	wantErr(t, err, snapshotfmt.ErrInvalidArgument, "must not contain '/'")
	if len(err.Error()) > 2000 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}
