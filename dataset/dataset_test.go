package dataset_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

var ctx = context.Background()

func generate(t testing.TB, dir string, spec fixtures.Spec) *reader.Snapshot {
	t.Helper()
	if _, err := fixtures.Generate(ctx, dir, spec, writer.Options{FileSize: 16 << 10}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertEqual proves target holds exactly source's entries and per-worker
// state, whatever the layouts.
func assertEqual(t *testing.T, target, source string) {
	t.Helper()
	var findings []string
	sum, err := verify.Equal(ctx, target, source, verify.EqualOptions{}, func(f verify.Finding) {
		findings = append(findings, f.Message)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Equal || sum.WorkerStates != 2 {
		t.Fatalf("%s differs from %s (%d worker states compared): %v", target, source, sum.WorkerStates, findings)
	}
}

// The round trip of the issue: generate -> export -> import at another
// bucket count -> equal entries and per-worker state.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "snap")
	s := generate(t, src, fixtures.Spec{Buckets: 8, Width: 4, Keys: 600, ValueSpread: true})
	cases := []struct {
		name      string
		format    dataset.Format
		partition string
		buckets   int
		mapping   snapshotfmt.Mapping
		width     int
	}{
		{"parquet", dataset.Parquet, "", 12, snapshotfmt.MappingMod, 0},
		{"parquet by state", dataset.Parquet, "state", 3, snapshotfmt.MappingRange, 2},
		{"parquet by bucket", dataset.Parquet, "bucket", 64, snapshotfmt.MappingMod, 6},
		{"arrow", dataset.Arrow, "", 5, snapshotfmt.MappingRange, 0},
		{"arrow by state", dataset.Arrow, "state", 16, snapshotfmt.MappingMod, 4},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+c.format.Ext())
			if c.partition != "" {
				out = filepath.Join(dir, c.name)
			}
			res, err := dataset.Export(ctx, s, out, dataset.ExportOptions{
				Format: c.format, PartitionBy: c.partition, RowGroupRows: 500,
				View: reader.ArrowOptions{BatchRows: 333},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows != s.Manifest().TotalEntries() || res.WorkerStateFile == "" || res.WorkerStateItems == 0 {
				t.Fatalf("export: %+v", res)
			}
			if c.partition == "state" && len(res.Files) != 3 {
				t.Errorf("partitioned by state: files %v, want 3", res.Files)
			}
			target := filepath.Join(dir, "imported", string(rune('a'+i)))
			os.MkdirAll(filepath.Dir(target), 0o755)
			ir, err := dataset.Import(ctx, out, target, dataset.ImportOptions{InferStates: true,
				Buckets: c.buckets, Mapping: c.mapping, Width: c.width, Memory: 160 << 10,
			})
			if err != nil {
				t.Fatal(err)
			}
			if ir.Entries != res.Rows || !ir.Verified || ir.StatesFrom != "export metadata" || len(ir.WorkerStates) != 2 {
				t.Fatalf("import: %+v", ir)
			}
			if ir.Sort.Runs == 0 {
				t.Errorf("a 160 KiB sort budget spilled no runs: the bounded-memory path went untested")
			}
			assertEqual(t, target, src)
		})
	}
}

func TestExportRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 20})
	out := filepath.Join(dir, "x.parquet")
	if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("second export: %v, want ErrRefused", err)
	}
	if _, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Force: true}); err != nil {
		t.Fatalf("--force: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*rebucket-tmp*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	for _, o := range []dataset.ExportOptions{
		{Compression: "lzma"}, {PartitionBy: "key"}, {Format: "csv"}, {Format: dataset.Arrow, Compression: "snappy"},
	} {
		if _, err := dataset.Export(ctx, s, filepath.Join(dir, "y"), o); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
}

func TestExportJSONL(t *testing.T) {
	dir := t.TempDir()
	s := generate(t, filepath.Join(dir, "snap"), fixtures.Spec{Buckets: 4, Width: 2, Keys: 50})
	out := filepath.Join(dir, "x.jsonl")
	res, err := dataset.Export(ctx, s, out, dataset.ExportOptions{Format: dataset.JSONL})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	per := map[string]int{}
	var keys0 []string
	for sc.Scan() {
		n++
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		// Every row has the same keys (null where absent).
		keys := slices.Sorted(maps.Keys(row))
		if keys0 == nil {
			keys0 = keys
		} else if !slices.Equal(keys, keys0) {
			t.Fatalf("line %d has keys %v, line 1 %v", n, keys, keys0)
		}
		st := row["step"].(string) + "/" + row["state"].(string)
		per[st]++
		if _, ok := row["key"].(string); !ok {
			t.Fatalf("line %d: utf8 key not decoded: %v", n, row)
		}
		switch st {
		case "count/per_user":
			if _, ok := row["value"].(float64); !ok {
				t.Fatalf("line %d: int64 value not a number: %v", n, row)
			}
		case "sessions/open":
			if _, ok := row["value"].(map[string]any); !ok || row["sub_key"] == nil {
				t.Fatalf("line %d: json value not embedded or sub_key missing: %v", n, row)
			}
		case "window/events":
			if _, ok := row["value_base64"].(string); !ok {
				t.Fatalf("line %d: bytes value not base64: %v", n, row)
			}
		}
	}
	if uint64(n) != res.Rows || uint64(n) != s.Manifest().TotalEntries() {
		t.Fatalf("%d lines, %d rows exported, %d entries", n, res.Rows, s.Manifest().TotalEntries())
	}
	for _, st := range s.Manifest().States {
		if uint64(per[st.QualifiedName()]) != st.Entries {
			t.Errorf("%s: %d lines, want %d", st.QualifiedName(), per[st.QualifiedName()], st.Entries)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.workers.jsonl")); err != nil {
		t.Errorf("per-worker state: %v", err)
	}
}

// foreignRow is a dataset made elsewhere: no export metadata.
type foreignRow struct {
	Step   string `parquet:"step"`
	State  string `parquet:"state"`
	Key    []byte `parquet:"key"`
	SubKey []byte `parquet:"sub_key,optional"`
	Value  []byte `parquet:"value"`
}

func writeParquet[T any](t testing.TB, p string, rows []T) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f)
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

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestImportForeignInferred(t *testing.T) {
	dir := t.TempDir()
	rows := []foreignRow{
		{Step: "agg", State: "total", Key: []byte("a"), Value: u64(1)},
		{Step: "agg", State: "total", Key: []byte("b"), Value: u64(2)},
		{Step: "tags", State: "byname", Key: []byte("a"), SubKey: []byte("x"), Value: []byte("1")},
		{Step: "tags", State: "byname", Key: []byte("a"), SubKey: []byte(""), Value: []byte("2")},
		{Step: "tags", State: "byname", Key: []byte("b"), SubKey: []byte("y"), Value: []byte("3")},
	}
	in := filepath.Join(dir, "foreign.parquet")
	writeParquet(t, in, rows)
	res, err := dataset.Import(ctx, in, filepath.Join(dir, "out"), dataset.ImportOptions{InferStates: true, Buckets: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatesFrom != "inferred" || res.Entries != 5 || res.Width != 1 || len(res.States) != 2 {
		t.Fatalf("%+v", res)
	}
	kinds := map[string]snapshotfmt.Kind{}
	for _, s := range res.States {
		kinds[s.QualifiedName()] = s.Kind
	}
	if kinds["agg/total"] != snapshotfmt.KindValue || kinds["tags/byname"] != snapshotfmt.KindMap {
		t.Fatalf("inferred kinds %v", kinds)
	}
	// A states file overrides inference (here: codecs, ids).
	states := []snapshotfmt.State{
		{ID: 9, Step: "agg", Name: "total", Kind: snapshotfmt.KindValue, ValueCodec: "int64"},
		{ID: 4, Step: "tags", Name: "byname", Kind: snapshotfmt.KindMap, SubKeyCodec: "utf8"},
	}
	res, err = dataset.Import(ctx, in, filepath.Join(dir, "out2"), dataset.ImportOptions{InferStates: true, Buckets: 2, States: states})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatesFrom != "states file" || res.States[0].ID != 4 || res.States[1].ValueCodec != "int64" {
		t.Fatalf("%+v", res.States)
	}
	// A states file without one of the dataset's states is refused.
	_, err = dataset.Import(ctx, in, filepath.Join(dir, "out3"), dataset.ImportOptions{InferStates: true, Buckets: 2, States: states[:1]})
	if !errors.Is(err, snapshotfmt.ErrInvalidArgument) || !strings.Contains(err.Error(), "tags/byname") {
		t.Fatalf("missing state: %v", err)
	}
}

func TestImportDuplicates(t *testing.T) {
	dir := t.TempDir()
	rows := []foreignRow{
		{Step: "s", State: "v", Key: []byte("k1"), Value: []byte("first")},
		{Step: "s", State: "v", Key: []byte("k2"), Value: []byte("x")},
		{Step: "s", State: "v", Key: []byte("k1"), Value: []byte("last")},
	}
	in := filepath.Join(dir, "dups.parquet")
	writeParquet(t, in, rows)
	_, err := dataset.Import(ctx, in, filepath.Join(dir, "a"), dataset.ImportOptions{InferStates: true, Buckets: 4})
	if !errors.Is(err, snapshotfmt.ErrInvalidArgument) || !strings.Contains(err.Error(), `s/v key="k1"`) {
		t.Fatalf("duplicates: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed import left its output: %v", err)
	}
	for _, c := range []struct{ mode, want string }{{"first", "first"}, {"last", "last"}} {
		out := filepath.Join(dir, c.mode)
		res, err := dataset.Import(ctx, in, out, dataset.ImportOptions{InferStates: true, Buckets: 4, Dedupe: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		if res.Duplicates != 1 || res.Entries != 2 {
			t.Fatalf("%s: %+v", c.mode, res)
		}
		s, err := reader.Open(out, reader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		it := s.NewIterAll(ctx)
		found := ""
		for it.Next() {
			dk, _ := snapshotfmt.DecodeKey(it.Key())
			if string(dk.Key) == "k1" {
				found = string(it.Value())
			}
		}
		it.Close()
		if found != c.want {
			t.Errorf("--dedupe %s kept %q", c.mode, found)
		}
	}
}

// Damaged and foreign inputs give clear errors, never a panic.
func TestImportBadInputs(t *testing.T) {
	cases := []struct {
		file  string
		class error
		want  []string
	}{
		{"missing_value.parquet", snapshotfmt.ErrInvalidArgument, []string{"missing column value", "missing column state"}},
		{"truncated.parquet", snapshotfmt.ErrCorrupt, []string{"truncated.parquet", "Parquet"}},
		{"empty.parquet", snapshotfmt.ErrCorrupt, []string{"is empty"}},
		{"mistake.csv", snapshotfmt.ErrCorrupt, []string{"not a Parquet or Arrow IPC file", "CSV"}},
		{"truncated.arrow", snapshotfmt.ErrCorrupt, []string{"Arrow IPC"}},
		{"mixed_subkey.parquet", snapshotfmt.ErrInvalidArgument, []string{"with and without sub_key"}},
		{"null_key.parquet", snapshotfmt.ErrInvalidArgument, []string{"key is null"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := dataset.Import(ctx, filepath.Join("testdata", c.file), out, dataset.ImportOptions{InferStates: true, Buckets: 4})
			if !errors.Is(err, c.class) {
				t.Fatalf("err %v, want %v", err, c.class)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output exists after a failed import")
			}
		})
	}
}

// The checked-in exports still import: the format of an export is stable.
func TestImportTestdata(t *testing.T) {
	for _, f := range []string{"small.parquet", "small.arrow"} {
		res, err := dataset.Import(ctx, filepath.Join("testdata", f), filepath.Join(t.TempDir(), "o"), dataset.ImportOptions{InferStates: true, Buckets: 3})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.Entries == 0 || len(res.WorkerStates) != 2 || res.StatesFrom != "export metadata" {
			t.Fatalf("%s: %+v", f, res)
		}
	}
}
