package sparkexport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/engine/spark"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// FuzzRowToTables feeds arbitrary bytes as a value row of every type
// through the export's decode and both table writers: a row either fails
// with ErrCorrupt or is written; nothing panics (a type assertion, a
// decimal beyond 128 bits or its precision, a struct of the wrong width).
func FuzzRowToTables(f *testing.F) {
	for _, v := range allTypesRows() {
		b, err := unsaferow.Encode(allTypes, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, unsaferow.FixedBytes(len(allTypes.Fields))))
	op := &spark.Operator{ID: 0, Name: "stateStoreSave"}
	s := &spark.Store{Name: "default", KeySchema: strct(field("k", kind(unsaferow.String))), ValueSchema: allTypes}
	key, _ := unsaferow.Encode(s.KeySchema, []any{"k"})
	kv, _ := unsaferow.Decode(s.KeySchema, key)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		vv, err := decode(allTypes, b)
		if err != nil {
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", err)
			}
			return
		}
		for _, fm := range []Format{Arrow, Parquet} {
			out, err := os.CreateTemp(dir, "fuzz")
			if err != nil {
				t.Fatal(err)
			}
			var tb table
			if fm == Arrow {
				tb, err = newArrowTable(out, op, s, nil, Options{BatchRows: 1})
			} else {
				tb, err = newParquetTable(out, op, s, nil, Options{RowGroupRows: 1})
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.add(0, kv, vv, key, b); err != nil {
				t.Fatalf("%s: %v", fm, err)
			}
			if err := tb.close(); err != nil {
				t.Fatalf("%s: %v", fm, err)
			}
			out.Close()
			os.Remove(filepath.Join(dir, filepath.Base(out.Name())))
		}
	})
}
