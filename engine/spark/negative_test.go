package spark

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// copyReal copies a real checkpoint into a temp dir for damaging.
func copyReal(t *testing.T, name string) string {
	dst := filepath.Join(t.TempDir(), name)
	if err := copyTree(context.Background(), realDir(t, name), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func editFile(t *testing.T, path string, f func(string) string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(f(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNegative(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   error
		msg    string
	}{
		{"uncommitted last batch", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "commits", "2")) }, snapshotfmt.ErrRefused, "--skip-uncommitted"},
		{"missing partition dir", func(t *testing.T, d string) { os.RemoveAll(filepath.Join(d, "state", "0", "1")) }, snapshotfmt.ErrCorrupt, "partition directory 1 of 2 is missing"},
		{"damaged delta block", func(t *testing.T, d string) {
			p := filepath.Join(d, "state", "0", "1", "3.delta")
			editFile(t, p, func(s string) string { b := []byte(s); b[30] ^= 0x40; return string(b) })
			os.Remove(filepath.Join(d, "state", "0", "1", "3.snapshot"))
		}, snapshotfmt.ErrCorrupt, "3.delta"},
		{"missing delta", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "state", "0", "0", "3.snapshot"))
			os.Remove(filepath.Join(d, "state", "0", "0", "2.delta"))
		}, snapshotfmt.ErrCorrupt, "2.delta"},
		{"unsupported operator", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "state", "0", "_metadata", "metadata"), func(s string) string {
				return strings.Replace(s, "stateStoreSave", "transformWithStateExec", 1)
			})
		}, snapshotfmt.ErrUnsupported, "transformWithStateExec"},
		{"unknown provider", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "offsets", "2"), func(s string) string {
				return strings.Replace(s, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider", "com.example.OwnStateStoreProvider", 1)
			})
		}, snapshotfmt.ErrUnsupported, "com.example.OwnStateStoreProvider"},
		{"avro", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "offsets", "2"), func(s string) string {
				return strings.Replace(s, `encodingFormat":"unsaferow"`, `encodingFormat":"avro"`, 1)
			})
		}, snapshotfmt.ErrUnsupported, "avro"},
		{"checkpoint format 2", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "offsets", "2"), func(s string) string {
				return strings.Replace(s, `"conf":{`, `"conf":{"spark.sql.streaming.stateStore.checkpointFormatVersion":"2",`, 1)
			})
		}, snapshotfmt.ErrUnsupported, "checkpointFormatVersion=2"},
		{"spark file checksums", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "state", "0", "0", "1.delta.crc"), []byte(`{"checksum":1}`), 0o644)
		}, snapshotfmt.ErrUnsupported, "checkpoint file checksums"},
		{"not a checkpoint", func(t *testing.T, d string) { os.RemoveAll(filepath.Join(d, "commits")) }, snapshotfmt.ErrNotFound, "not a Spark checkpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := copyReal(t, "agg_str")
			tc.damage(t, src)
			before := treeDigest(t, src)
			dst := filepath.Join(t.TempDir(), "out")
			_, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("target written: %v", err)
			}
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), TempPrefix+"*"))
			if len(left) > 0 {
				t.Fatalf("temporary left behind: %v", left)
			}
			if treeDigest(t, src) != before {
				t.Fatal("source changed")
			}
		})
	}
}

func TestVerifyFindings(t *testing.T) {
	src := copyReal(t, "agg_str")
	os.RemoveAll(filepath.Join(src, "state", "0", "1"))
	rep, err := Verify(context.Background(), src, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FindingsTotal != 1 || !strings.Contains(rep.Findings[0].Problem, "missing") {
		t.Fatalf("findings %v", rep.Findings)
	}
	// A key moved into the wrong partition is found.
	src = copyReal(t, "agg_str")
	p0 := filepath.Join(src, "state", "0", "0")
	ls, err := LoadPartition(p0, 3)
	if err != nil {
		t.Fatal(err)
	}
	p1 := filepath.Join(src, "state", "0", "1")
	var rec []byte
	ls.Each(func(k, v []byte) error {
		if rec == nil {
			rec = AppendRecord(rec, k, v, false)
		}
		return nil
	})
	rec = append(rec, EndRecord...)
	var buf bytes.Buffer
	z := lz4java.NewWriter(&buf, 0)
	z.Write(rec)
	z.Close()
	// A snapshot at the committed version wins over the deltas.
	os.WriteFile(filepath.Join(p1, "3.snapshot"), buf.Bytes(), 0o644)
	rep, err = Verify(context.Background(), src, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FindingsTotal != 1 || !strings.Contains(rep.Findings[0].Problem, "belongs in partition 0") {
		t.Fatalf("findings %v", rep.Findings)
	}
	// and Rewrite refuses it.
	if _, err := Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "o"), RewriteOptions{Partitions: 3}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("rewrite: %v", err)
	}
}

func TestSkipUncommitted(t *testing.T) {
	src := copyReal(t, "agg_str")
	// Batch 2 without a commit: its offsets stay, its state is ignored.
	os.Remove(filepath.Join(src, "commits", "2"))
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 4, SkipUncommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.LastCommitted != 1 || res.NewBatch != 3 || res.StateVersion != 4 || len(res.Skipped) != 1 || res.Skipped[0] != 2 {
		t.Fatalf("%+v", res)
	}
	// The new state is the committed state (version 2) of the source.
	c, _ := Open(src)
	want, _ := c.scanAt(context.Background(), ScanOptions{}, 2)
	nc, _ := Open(dst)
	got, _ := nc.Scan(context.Background(), ScanOptions{})
	if d := compareReports(c, nc, want, got); !d.Equal {
		t.Fatalf("%v", d.Differences)
	}
	for _, f := range []string{"commits/2", "commits/3", "offsets/3"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRewriteRefusesExistingTargetAndSameCount(t *testing.T) {
	src := realDir(t, "agg_str")
	if _, err := Rewrite(context.Background(), src, t.TempDir(), RewriteOptions{Partitions: 4}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("existing target: %v", err)
	}
	if _, err := Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "x"), RewriteOptions{Partitions: 2}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("same count: %v", err)
	}
	if _, err := Rewrite(context.Background(), src, filepath.Join(src, "inside"), RewriteOptions{Partitions: 4}); err == nil {
		t.Fatal("target inside source accepted")
	}
}

// The new offsets entry differs from offsets/C only in the partition conf.
func TestOffsetsRewrittenMinimally(t *testing.T) {
	src := realDir(t, "agg_str")
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8}); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(filepath.Join(src, "offsets", "2"))
	nw, _ := os.ReadFile(filepath.Join(dst, "offsets", "3"))
	if want := bytes.Replace(old, []byte(`"spark.sql.shuffle.partitions":"2"`), []byte(`"spark.sql.shuffle.partitions":"8"`), 1); !bytes.Equal(nw, want) {
		t.Fatalf("offsets/3 =\n%s\nwant\n%s", nw, want)
	}
	oc, _ := os.ReadFile(filepath.Join(src, "commits", "2"))
	nc, _ := os.ReadFile(filepath.Join(dst, "commits", "3"))
	if !bytes.Equal(oc, nc) {
		t.Fatal("commit differs")
	}
	side, _ := os.ReadFile(filepath.Join(dst, "offsets", ".3.crc"))
	if !bytes.Equal(side, HadoopCRC(nw)) {
		t.Fatal("offsets .crc wrong")
	}
	// Old partitions keep their history; every partition has 4.snapshot.
	if _, err := os.Stat(filepath.Join(dst, "state", "0", "0", "1.delta")); err != nil {
		t.Fatal(err)
	}
}

func TestOffsetsV2(t *testing.T) {
	raw := []byte("v2\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{\"spark.sql.shuffle.partitions\":\"2\",\"x\":\"y\"},\"sourceMetadataInfo\":{}}\n0:{\"logOffset\":1}\n1:-")
	o, err := parseOffset(5, raw)
	if err != nil || o.Version != 2 {
		t.Fatal(o, err)
	}
	got, err := o.WithPartitions(16)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(raw, []byte(`partitions":"2"`), []byte(`partitions":"16"`), 1); !bytes.Equal(got, want) {
		t.Fatalf("%s", got)
	}
	// Both confs are changed when both are recorded.
	raw = []byte("v1\n{\"conf\":{\"spark.sql.streaming.internal.stateStore.partitions\":\"2\",\"spark.sql.shuffle.partitions\":\"2\"}}\n{\"a\":1}")
	o, _ = parseOffset(0, raw)
	got, _ = o.WithPartitions(3)
	if strings.Count(string(got), `"3"`) != 2 {
		t.Fatalf("%s", got)
	}
	if _, err := parseOffset(0, []byte("v9\n{}")); !errors.Is(err, snapshotfmt.ErrUnsupported) {
		t.Fatal(err)
	}
}

func treeDigest(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p)
		if !fi.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

func FuzzReadRecords(f *testing.F) {
	var seed []byte
	seed = AppendRecord(seed, []byte("key"), []byte("value"), false)
	seed = AppendRecord(seed, []byte("gone"), nil, true)
	f.Add(append(seed, EndRecord...))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ReadRecords(bytes.NewReader(b), true, func(k, v []byte, del bool) error { return nil })
		if err != nil && !errors.Is(err, snapshotfmt.ErrCorrupt) {
			t.Fatalf("%v", err)
		}
	})
}

// A whole state file through lz4 and records.
func FuzzStateFile(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "real", "agg_str", "state", "0", "0", "3.delta"))
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ReadRecords(lz4java.NewReader(bytes.NewReader(b)), true, func(k, v []byte, del bool) error { return nil })
		if err != nil && !errors.Is(err, snapshotfmt.ErrCorrupt) && err != io.ErrUnexpectedEOF {
			t.Fatalf("%v", err)
		}
	})
}

// Without operator metadata (Spark < 3.5) the kind is inferred from the
// layout, and the rewrite is the same as with it.
func TestNoOperatorMetadata(t *testing.T) {
	for _, name := range []string{"agg_str_int", "join", "session", "dedup"} {
		src := copyReal(t, name)
		withMeta, err := Open(realDir(t, name))
		if err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(src, "state", "0", "_metadata"))
		c, err := Open(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		op, want := c.Operators[0], withMeta.Operators[0]
		if !op.Inferred || op.Unsupported != "" || len(op.Stores) != len(want.Stores) {
			t.Fatalf("%s: %+v", name, op)
		}
		for i, s := range want.Stores {
			var got *Store
			for _, x := range op.Stores {
				if x.Name == s.Name {
					got = x
				}
			}
			if got == nil || fmt.Sprint(got.KeyCols) != fmt.Sprint(s.KeyCols) {
				t.Fatalf("%s store %d: %+v, want key cols %v", name, i, got, s.KeyCols)
			}
		}
		dst := filepath.Join(t.TempDir(), "out")
		if _, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 5}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A checkpoint left behind by Spark's own repartition tool after it
// refused the HDFS-backed store: offsets/3 is offsets/2 with 8 partitions
// and no commit. The refusal says skipping loses nothing, and skipping
// gives the committed state in M partitions.
func TestSparkToolLeftover(t *testing.T) {
	src := copyReal(t, "agg_str")
	old, _ := os.ReadFile(filepath.Join(src, "offsets", "2"))
	left := bytes.Replace(old, []byte(`partitions":"2"`), []byte(`partitions":"8"`), 1)
	os.WriteFile(filepath.Join(src, "offsets", "3"), left, 0o644)
	_, err := Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "o"), RewriteOptions{Partitions: 8})
	if !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), "loses no input") {
		t.Fatalf("%v", err)
	}
	dst := filepath.Join(t.TempDir(), "o2")
	res, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8, SkipUncommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewBatch != 4 || res.StateVersion != 5 || res.FromPartitions != 2 {
		t.Fatalf("%+v", res)
	}
	eq, err := Equal(context.Background(), realDir(t, "agg_str"), dst, ScanOptions{})
	if err != nil || !eq.Equal {
		t.Fatalf("%+v %v", eq, err)
	}
	// New data after C: no "loses no input" hint.
	src = copyReal(t, "agg_str")
	os.Remove(filepath.Join(src, "commits", "2"))
	_, err = Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "o3"), RewriteOptions{Partitions: 8})
	if !errors.Is(err, snapshotfmt.ErrRefused) || strings.Contains(err.Error(), "loses no input") {
		t.Fatalf("%v", err)
	}
}
