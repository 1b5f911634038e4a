package dataset_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// A 15 MiB key at --memory 32MiB took 453 MB; a row over 1/16 of the
// budget is now refused, naming the row and the --memory that takes it.
func TestImportRowOverMemoryShare(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 15<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	rows := []foreignRow{
		{Step: "s", State: "v", Key: []byte("a"), Value: []byte("1")},
		{Step: "s", State: "v", Key: big, Value: []byte("2")},
	}
	// Without the key's bounds in the footer (as pyarrow truncates them):
	// else the footer itself holds the key and its bound refuses first.
	in := filepath.Join(dir, "big.parquet")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[foreignRow](f, parquet.SkipPageBounds("key"))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = dataset.Import(ctx, in, filepath.Join(dir, "out"), dataset.ImportOptions{InferStates: true, Buckets: 4, Memory: 32 << 20})
	if !errors.Is(err, snapshotfmt.ErrTooLarge) || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "raise --memory to at least 240.0 MiB") {
		t.Fatalf("import of a 15 MiB key at 32 MiB: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Fatalf("target exists after the refusal: %v", err)
	}
	// The same row is taken when --memory allows it.

	if _, err := dataset.Import(ctx, in, filepath.Join(dir, "out2"), dataset.ImportOptions{InferStates: true, Buckets: 4, Memory: 256 << 20}); err != nil {
		t.Fatalf("at 256 MiB: %v", err)
	}
}

// relist rewrites a Parquet file's footer with its first row group listed
// n times, every copy pointing at the same column chunks.
func relist(t *testing.T, src, dst string, n int) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-flen:len(data)-8], &md); err != nil {
		t.Fatal(err)
	}
	rg := md.RowGroups[0]
	md.RowGroups = md.RowGroups[:0]
	for range n {
		md.RowGroups = append(md.RowGroups, rg)
	}
	md.NumRows = rg.NumRows * int64(n)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(data[:len(data)-8-flen])
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A footer listing 100,000 row groups on one chunk took 636 MB and 182 s
// at --memory 32MiB: the footer is now bounded by a share of --memory,
// and chunks that share bytes are refused before a row is read.
func TestImportParquetFooterBounds(t *testing.T) {
	dir := t.TempDir()
	rows := make([]foreignRow, 100)
	for i := range rows {
		rows[i] = foreignRow{Step: "s", State: "v", Key: []byte{byte(i)}, Value: []byte("x")}
	}
	good := filepath.Join(dir, "good.parquet")
	writeParquet(t, good, rows)
	for _, tc := range []struct {
		name   string
		groups int
		want   error
		msg    string
	}{
		{"one chunk listed twice", 2, snapshotfmt.ErrCorrupt, "claim the same bytes"},
		{"one chunk listed 100,000 times", 100_000, snapshotfmt.ErrTooLarge, "over the 1.0 MiB import decodes at --memory 32.0 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".parquet")
			relist(t, good, in, tc.groups)
			_, err := dataset.Import(ctx, in, filepath.Join(t.TempDir(), "out"), dataset.ImportOptions{InferStates: true, Buckets: 4, Memory: 32 << 20})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.want, tc.msg)
			}
		})
	}
	if _, err := dataset.Import(ctx, good, filepath.Join(dir, "out"), dataset.ImportOptions{InferStates: true, Buckets: 4, Memory: 32 << 20}); err != nil {
		t.Fatalf("the untouched file: %v", err)
	}
}
