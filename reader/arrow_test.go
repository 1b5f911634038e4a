package reader_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func genSnap(t *testing.T, spec fixtures.Spec) *reader.Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	// Small files so the view reads several in parallel.
	if _, err := fixtures.Generate(context.Background(), dir, spec, writer.Options{FileSize: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type viewRow struct {
	bucket      uint32
	step, state string
	key, sub    []byte
	subNull     bool
	value       []byte
	valueInt64  *int64
	keyUTF8     *string
	valueJSON   *string
}

func readView(t *testing.T, s *reader.Snapshot, opts reader.ArrowOptions) ([]viewRow, *arrow.Schema, int) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	opts.Mem = mem
	rr, err := s.NewRecordReader(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var rows []viewRow
	batches := 0
	schema := rr.Schema()
	for rr.Next() {
		rec := rr.Record()
		batches++
		if opts.BatchRows > 0 && rec.NumRows() > int64(opts.BatchRows) {
			t.Fatalf("batch of %d rows, want at most %d", rec.NumRows(), opts.BatchRows)
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) == 0 {
				return nil
			}
			return rec.Column(idx[0])
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			var vr viewRow
			vr.bucket = col("bucket").(*array.Uint32).Value(r)
			st := col("step").(*array.Dictionary)
			vr.step = st.Dictionary().(*array.String).Value(st.GetValueIndex(r))
			sn := col("state").(*array.Dictionary)
			vr.state = sn.Dictionary().(*array.String).Value(sn.GetValueIndex(r))
			vr.key = bytes.Clone(col("key").(*array.Binary).Value(r))
			sub := col("sub_key").(*array.Binary)
			vr.subNull = sub.IsNull(r)
			vr.sub = bytes.Clone(sub.Value(r))
			vr.value = bytes.Clone(col("value").(*array.Binary).Value(r))
			if c := col("value_int64"); c != nil && !c.IsNull(r) {
				v := c.(*array.Int64).Value(r)
				vr.valueInt64 = &v
			}
			if c := col("key_utf8"); c != nil && !c.IsNull(r) {
				v := c.(*array.String).Value(r)
				vr.keyUTF8 = &v
			}
			if c := col("value_json"); c != nil && !c.IsNull(r) {
				v := c.(*array.String).Value(r)
				vr.valueJSON = &v
			}
			rows = append(rows, vr)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Close()
	mem.AssertSize(t, 0)
	return rows, schema, batches
}

func TestArrowViewAll(t *testing.T) {
	s := genSnap(t, fixtures.Spec{Buckets: 8, Width: 2, Keys: 300})
	m := s.Manifest()
	rows, schema, batches := readView(t, s, reader.ArrowOptions{BatchRows: 100, Parallelism: 3})
	if uint64(len(rows)) != m.TotalEntries() {
		t.Fatalf("view has %d rows, the snapshot %d entries", len(rows), m.TotalEntries())
	}
	if batches < len(rows)/100 {
		t.Errorf("%d batches for %d rows of batch size 100", batches, len(rows))
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	want := []string{"bucket", "step", "state", "key", "sub_key", "value", "key_utf8", "sub_key_utf8", "value_int64", "value_json"}
	if len(names) != len(want) {
		t.Fatalf("columns %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("columns %v, want %v", names, want)
		}
	}
	// Key order across batches and files (files are read in parallel but
	// yielded in order), and the entries match the plain iterator's.
	it := s.NewIterAll(context.Background())
	defer it.Close()
	perState := map[string]int{}
	for i, r := range rows {
		if !it.Next() {
			t.Fatalf("iterator ended at row %d", i)
		}
		dk, _ := snapshotfmt.DecodeKey(it.Key())
		st, _ := m.StateByID(dk.State)
		if r.bucket != dk.Bucket || r.step != st.Step || r.state != st.Name || !bytes.Equal(r.key, dk.Key) || !bytes.Equal(r.value, it.Value()) {
			t.Fatalf("row %d = %s/%s %q in %d, iterator has %s %q in %d", i, r.step, r.state, r.key, r.bucket, st.QualifiedName(), dk.Key, dk.Bucket)
		}
		perState[st.QualifiedName()]++
		isMap := st.Kind == snapshotfmt.KindMap
		if r.subNull == isMap || (isMap && !bytes.Equal(r.sub, dk.SubKey)) {
			t.Fatalf("row %d (%s): sub_key null=%v %q, want map sub-key %q", i, st.QualifiedName(), r.subNull, r.sub, dk.SubKey)
		}
		// Decoded columns: present exactly where the state's hint applies.
		switch st.QualifiedName() {
		case "count/per_user":
			if r.valueInt64 == nil || *r.valueInt64 != int64(binary.BigEndian.Uint64(r.value)) {
				t.Fatalf("row %d: value_int64 %v for %x", i, r.valueInt64, r.value)
			}
			if r.valueJSON != nil {
				t.Fatalf("row %d: value_json set on an int64 state", i)
			}
		case "sessions/open":
			if r.valueJSON == nil || *r.valueJSON != string(r.value) || r.valueInt64 != nil {
				t.Fatalf("row %d: value_json %v value_int64 %v", i, r.valueJSON, r.valueInt64)
			}
		case "window/events":
			if r.valueJSON != nil || r.valueInt64 != nil {
				t.Fatalf("row %d: decoded value on a bytes state", i)
			}
		}
		if r.keyUTF8 == nil || *r.keyUTF8 != string(r.key) {
			t.Fatalf("row %d: key_utf8 %v", i, r.keyUTF8)
		}
	}
	if it.Next() {
		t.Fatal("view ended before the iterator")
	}
	for _, st := range m.States {
		if uint64(perState[st.QualifiedName()]) != st.Entries {
			t.Errorf("%s: %d rows, manifest says %d", st.QualifiedName(), perState[st.QualifiedName()], st.Entries)
		}
	}
}

func TestArrowViewFilters(t *testing.T) {
	s := genSnap(t, fixtures.Spec{Buckets: 16, Width: 4, Keys: 400})
	m := s.Manifest()
	sumBuckets := func(lo, hi uint32) uint64 {
		var n uint64
		for b := lo; b <= hi; b++ {
			n += m.BucketEntries[b]
		}
		return n
	}
	cnt, _ := m.StateByName("count/per_user")
	cases := []struct {
		name       string
		opts       reader.ArrowOptions
		want       uint64
		lo, hi     uint32
		onlyState  string
		wantSchema int
	}{
		{"bucket range", reader.ArrowOptions{BucketRange: true, BucketLo: 3, BucketHi: 9}, sumBuckets(3, 9), 3, 9, "", 10},
		{"one bucket", reader.ArrowOptions{BucketRange: true, BucketLo: 15, BucketHi: 15}, sumBuckets(15, 15), 15, 15, "", 10},
		{"worker 1/3", reader.ArrowOptions{Worker: 1, Width: 3}, sumBuckets(6, 10), 6, 10, "", 10},
		{"worker and range", reader.ArrowOptions{Worker: 1, Width: 3, BucketRange: true, BucketLo: 0, BucketHi: 7}, sumBuckets(6, 7), 6, 7, "", 10},
		{"state", reader.ArrowOptions{States: []string{"count/per_user"}}, cnt.Entries, 0, 15, "count/per_user", 8},
		{"idle worker", reader.ArrowOptions{Worker: 4, Width: 20}, 0, 0, 15, "", 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, schema, _ := readView(t, s, c.opts)
			if uint64(len(rows)) != c.want {
				t.Fatalf("%d rows, want %d", len(rows), c.want)
			}
			if len(schema.Fields()) != c.wantSchema {
				t.Errorf("%d columns, want %d (decoded columns follow the selected states)", len(schema.Fields()), c.wantSchema)
			}
			for _, r := range rows {
				if r.bucket < c.lo || r.bucket > c.hi {
					t.Fatalf("row in bucket %d outside %d-%d", r.bucket, c.lo, c.hi)
				}
				if c.onlyState != "" && r.step+"/"+r.state != c.onlyState {
					t.Fatalf("row of %s/%s", r.step, r.state)
				}
			}
		})
	}
}

func TestArrowViewBadOptions(t *testing.T) {
	s := genSnap(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 20})
	for _, o := range []reader.ArrowOptions{
		{States: []string{"nope/x"}},
		{BucketRange: true, BucketLo: 2, BucketHi: 4},
		{BucketRange: true, BucketLo: 3, BucketHi: 2},
		{Worker: 3, Width: 2},
	} {
		if _, err := s.NewRecordReader(context.Background(), o); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want ErrInvalidArgument", o, err)
		}
	}
}

// Closing early stops the producers and frees every batch.
func TestArrowViewCloseEarly(t *testing.T) {
	s := genSnap(t, fixtures.Spec{Buckets: 8, Width: 2, Keys: 500})
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	rr, err := s.NewRecordReader(context.Background(), reader.ArrowOptions{BatchRows: 10, Parallelism: 2, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	rr.Close()
	mem.AssertSize(t, 0)
}

// A damaged file surfaces as ErrCorrupt from the view.
func TestArrowViewCorrupt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := s.Manifest().Files[len(s.Manifest().Files)/2]
	flipByte(t, s.Path(f.Path))
	rr, err := s.NewRecordReader(context.Background(), reader.ArrowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	for rr.Next() {
	}
	if !errors.Is(rr.Err(), snapshotfmt.ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", rr.Err())
	}
}

func flipByte(t *testing.T, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
