package dataset_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// A plain table (issue 15 item 2): VARCHAR key and BIGINT value columns,
// no step or state column. With --step/--state and the codec hints of
// --states it imports, the key as its UTF-8 bytes and the value as int64
// big-endian, and exports back with the same decoded values.
func TestImportPlainTypedTable(t *testing.T) {
	type row struct {
		Key   string `parquet:"key"`
		Value int64  `parquet:"value"`
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "plain.parquet")
	var rows []row
	want := map[string]int64{}
	for i := 0; i < 50; i++ {
		r := row{Key: "user-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('0'+i/26)), Value: int64(i*1000 - 7)}
		rows = append(rows, r)
		want[r.Key] = r.Value
	}
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	states := []snapshotfmt.State{{ID: 1, Step: "count", Name: "per_user", Kind: snapshotfmt.KindValue, KeyCodec: "utf8", ValueCodec: "int64"}}
	// Without the codec hint an integer column cannot be encoded.
	bare := []snapshotfmt.State{{ID: 1, Step: "count", Name: "per_user", Kind: snapshotfmt.KindValue}}
	if _, err := dataset.Import(ctx, in, filepath.Join(dir, "bare"), dataset.ImportOptions{Buckets: 4, States: bare, NoWorkerState: true, Step: "count", State: "per_user"}); err == nil || !strings.Contains(err.Error(), "codec int64") {
		t.Fatalf("integer value without an int64 codec: %v", err)
	}
	out := filepath.Join(dir, "snap")
	res, err := dataset.Import(ctx, in, out, dataset.ImportOptions{Buckets: 4, States: states, NoWorkerState: true, Step: "count", State: "per_user"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 50 {
		t.Fatalf("%d entries, want 50", res.Entries)
	}
	s, err := reader.Open(out, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jl := filepath.Join(dir, "back.jsonl")
	if _, err := dataset.Export(ctx, s, jl, dataset.ExportOptions{Format: dataset.JSONL}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(jl)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d rows back", len(lines))
	}
	for k, v := range want {
		if !strings.Contains(string(b), `"key":"`+k+`"`) || !strings.Contains(string(b), `"value":`+itoa(v)) {
			t.Fatalf("key %s value %d not exported back:\n%s", k, v, lines[0])
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
