package dataset_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
)

// TestWriteTestdata regenerates testdata/ (REBUCKET_UPDATE_TESTDATA=1): the
// small exports, and the damaged and foreign inputs of TestImportBadInputs
// and the fuzz seeds.
func TestWriteTestdata(t *testing.T) {
	if os.Getenv("REBUCKET_UPDATE_TESTDATA") == "" {
		t.Skip("set REBUCKET_UPDATE_TESTDATA=1 to regenerate testdata/")
	}
	td := "testdata"
	os.MkdirAll(td, 0o755)
	s := generate(t, filepath.Join(t.TempDir(), "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 8, SubKeys: 2, ListLen: 1, ValueSize: 8})
	for _, f := range []dataset.Format{dataset.Parquet, dataset.Arrow} {
		out := filepath.Join(td, "small"+f.Ext())
		if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Format: f, Force: true}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(td, "truncated"+f.Ext()), data[:len(data)/2], 0o644))
	}
	must(t, os.WriteFile(filepath.Join(td, "empty.parquet"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(td, "mistake.csv"), []byte("step,state,key,value\ncount,per_user,user-1,17\n"), 0o644))
	type missing struct {
		Step string `parquet:"step"`
		Key  []byte `parquet:"key"`
	}
	writeParquet(t, filepath.Join(td, "missing_value.parquet"), []missing{{"count", []byte("a")}})
	type keyString struct {
		Step  string `parquet:"step"`
		State string `parquet:"state"`
		Key   string `parquet:"key"`
		Value []byte `parquet:"value"`
	}
	writeParquet(t, filepath.Join(td, "key_string.parquet"), []keyString{{"count", "per_user", "a", u64(1)}})
	writeParquet(t, filepath.Join(td, "mixed_subkey.parquet"), []foreignRow{
		{Step: "m", State: "x", Key: []byte("a"), SubKey: []byte("s"), Value: []byte("1")},
		{Step: "m", State: "x", Key: []byte("b"), Value: []byte("2")},
	})
	type nullKey struct {
		Step  string `parquet:"step"`
		State string `parquet:"state"`
		Key   []byte `parquet:"key,optional"`
		Value []byte `parquet:"value"`
	}
	writeParquet(t, filepath.Join(td, "null_key.parquet"), []nullKey{{"s", "v", nil, []byte("1")}})
	writeParquet(t, filepath.Join(td, "foreign.parquet"), []foreignRow{
		{Step: "agg", State: "total", Key: []byte("a"), Value: u64(1)},
		{Step: "tags", State: "byname", Key: []byte("a"), SubKey: []byte("x"), Value: []byte("1")},
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
