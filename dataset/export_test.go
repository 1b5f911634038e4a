package dataset_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
)

// TestParquetRowGroupsAndColumns checks the column-parallel Parquet sink:
// row groups hold exactly RowGroupRows rows (batches of other sizes are
// split at the boundary), and every column of every row matches the view
// it was written from.
func TestParquetRowGroupsAndColumns(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 8, Width: 2, Keys: 700, ValueSpread: true})
	total := int64(s.Manifest().TotalEntries())
	cases := []struct {
		name            string
		rowGroup, batch int64
		compression     string
	}{
		{"groups smaller than batches", 300, 1000, "zstd"},
		{"groups larger than batches", 1000, 333, "snappy"},
		{"one group", total + 5, 128, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.parquet")
			if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{
				RowGroupRows: c.rowGroup, Compression: c.compression, View: reader.ArrowOptions{BatchRows: int(c.batch)},
			}); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			pf, err := parquet.OpenFile(f, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			if pf.NumRows() != total {
				t.Fatalf("%d rows, want %d", pf.NumRows(), total)
			}
			rgs := pf.RowGroups()
			for i, rg := range rgs {
				want := c.rowGroup
				if i == len(rgs)-1 {
					want = total - int64(i)*c.rowGroup
				}
				if rg.NumRows() != want {
					t.Fatalf("row group %d of %d: %d rows, want %d", i, len(rgs), rg.NumRows(), want)
				}
			}
			// Every row against the view, column by column.
			rr, err := s.NewRecordReader(ctx, reader.ArrowOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rr.Close()
			schema := pf.Schema()
			rows := parquet.NewReader(pf)
			defer rows.Close()
			buf := make([]parquet.Row, 1)
			for rr.Next() {
				rec := rr.Record()
				for r := 0; r < int(rec.NumRows()); r++ {
					if n, err := rows.ReadRows(buf); n != 1 {
						t.Fatalf("read row: %v", err)
					}
					for ci, fl := range rec.Schema().Fields() {
						lc, ok := schema.Lookup(fl.Name)
						if !ok {
							t.Fatalf("column %s missing", fl.Name)
						}
						got := buf[0][lc.ColumnIndex]
						col := rec.Column(ci)
						if col.IsNull(r) != got.IsNull() {
							t.Fatalf("row %d column %s: null %v, want %v", r, fl.Name, got.IsNull(), col.IsNull(r))
						}
						if col.IsNull(r) {
							continue
						}
						want := col.ValueStr(r)
						var have string
						switch got.Kind() {
						case parquet.ByteArray:
							have = string(got.ByteArray())
							if fl.Name == reader.ColKey || fl.Name == reader.ColSubKey || fl.Name == reader.ColValue {
								// ValueStr base64-encodes binary; compare bytes.
								b := col.(interface{ Value(int) []byte }).Value(r)
								if !bytes.Equal(got.ByteArray(), b) {
									t.Fatalf("row %d column %s: %q, want %q", r, fl.Name, got.ByteArray(), b)
								}
								continue
							}
						default:
							have = got.String()
							if fl.Name == reader.ColBucket {
								have = parquet.Int32Value(got.Int32()).String()
							}
						}
						if have != want {
							t.Fatalf("row %d column %s: %q, want %q", r, fl.Name, have, want)
						}
					}
				}
			}
			if err := rr.Err(); err != nil {
				t.Fatal(err)
			}
			if n, _ := rows.ReadRows(buf); n != 0 {
				t.Fatalf("the file has more rows than the view")
			}
		})
	}
}
