package spark

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/rocksdbsst"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// rocksCheckpoints are RocksDB-provider checkpoints made by pyspark 4.3.0
// (interop/spark/make_checkpoints.py), each beside its HDFS-backed twin
// of the same query and input.
var rocksCheckpoints = map[string]string{
	"rocksdb":                      "agg_string", // zips of SSTs (changelog off)
	"agg_string_rocksdb_changelog": "agg_string", // changelogs only
	"join_rocksdb_changelog":       "join",
	"two_op_rocksdb":               "two_op",
}

func interopCkpt(name string) string {
	return filepath.Join(sharedCheckpoints, name, "checkpoint")
}

func copyInterop(t *testing.T, name string) string {
	dst := filepath.Join(t.TempDir(), name)
	if err := copyTree(context.Background(), interopCkpt(name), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A RocksDB checkpoint holds the same rows as the HDFS-backed one of the
// same query, before and after rewriting, to more and fewer partitions
// and back (the second rewrite reads zips or changelogs plus rebucket's
// own changelog).
func TestRocksRewriteEqualsHDFSTwin(t *testing.T) {
	ctx := context.Background()
	for name, twin := range rocksCheckpoints {
		t.Run(name, func(t *testing.T) {
			src := interopCkpt(name)
			if eq, err := Equal(ctx, src, interopCkpt(twin), ScanOptions{}); err != nil || !eq.Equal {
				t.Fatalf("source against its HDFS twin: %+v %v", eq, err)
			}
			prev := src
			for i, m := range []int{8, 3, 5, 2} {
				dst := filepath.Join(t.TempDir(), itoa(i))
				res, err := Rewrite(ctx, prev, dst, RewriteOptions{Partitions: m})
				if err != nil {
					t.Fatalf("to %d: %v", m, err)
				}
				nc, err := Open(dst)
				if err != nil {
					t.Fatal(err)
				}
				if nc.Provider != RocksDBProvider || nc.Partitions != m {
					t.Fatalf("to %d: provider %s, %d partitions", m, nc.Provider, nc.Partitions)
				}
				// Every partition 0..m-1 of every store has the new version
				// as a changelog; no RocksDB file is written.
				for _, op := range nc.Operators {
					for _, s := range op.Stores {
						for q := range m {
							d := s.Dir(op.Dir, q)
							if _, err := os.Stat(filepath.Join(d, itoa(int(res.StateVersion))+".changelog")); err != nil {
								t.Fatalf("to %d: partition %d: %v", m, q, err)
							}
							if _, err := os.Stat(filepath.Join(d, "."+itoa(int(res.StateVersion))+".changelog.crc")); err != nil {
								t.Fatalf("to %d: partition %d has no Hadoop .crc: %v", m, q, err)
							}
						}
					}
				}
				rep, err := Verify(ctx, dst, ScanOptions{})
				if err != nil || rep.FindingsTotal != 0 {
					t.Fatalf("to %d: verify %+v %v", m, rep.Findings, err)
				}
				if eq, err := Equal(ctx, dst, interopCkpt(twin), ScanOptions{}); err != nil || !eq.Equal {
					t.Fatalf("to %d: against the HDFS twin: %+v %v", m, eq, err)
				}
				prev = dst
			}
		})
	}
}

// A partition new to the layout gets an empty snapshot (a zip of Spark's
// metadata alone) below the new version and every row in the changelog
// of the new version; an old one keeps its history and gets one changelog.
func TestRocksNewPartitionLayout(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Rewrite(context.Background(), interopCkpt("agg_string_rocksdb_changelog"), dst, RewriteOptions{Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	v := res.StateVersion
	p3 := filepath.Join(dst, "state", "0", "3")
	rp, err := ListRocksPartition(p3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Zips) != 1 || !rp.Zips[v-1] || len(rp.Changelogs) != 1 || !rp.Changelogs[v] {
		t.Fatalf("partition 3: zips %v changelogs %v, want %d.zip and %d.changelog", rp.Zips, rp.Changelogs, v-1, v)
	}
	meta, err := ReadRocksZip(filepath.Join(p3, itoa(int(v-1))+".zip"))
	if err != nil || len(meta.SSTFiles) != 0 || meta.NumKeys != 0 {
		t.Fatalf("empty snapshot: %+v %v", meta, err)
	}
	if _, err := os.Stat(filepath.Join(p3, "."+itoa(int(v-1))+".zip.crc")); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadStateFile(filepath.Join(p3, itoa(int(v))+".changelog"), func(k, v []byte, del bool) error {
		if del {
			t.Fatal("a delete in a new partition")
		}
		return nil
	})
	if err != nil || rows == 0 {
		t.Fatalf("%d rows, %v", rows, err)
	}
	rp0, err := ListRocksPartition(filepath.Join(dst, "state", "0", "0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rp0.Zips) != 0 || len(rp0.Changelogs) != int(v) {
		t.Fatalf("partition 0: zips %v changelogs %v", rp0.Zips, rp0.Changelogs)
	}
}

func rewriteErr(t *testing.T, src string) error {
	t.Helper()
	before := treeDigest(t, src)
	dst := filepath.Join(t.TempDir(), "out")
	_, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8})
	if err == nil {
		t.Fatal("rewrite accepted it")
	}
	if _, serr := os.Stat(dst); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("target written: %v", serr)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), TempPrefix+"*")); len(left) > 0 {
		t.Fatalf("temporary left behind: %v", left)
	}
	if treeDigest(t, src) != before {
		t.Fatal("source changed")
	}
	return err
}

func firstSST(t *testing.T, part string) string {
	ssts, _ := filepath.Glob(filepath.Join(part, "SSTs", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no SST")
	}
	return ssts[0]
}

// rezip rewrites one entry of a zip.
func rezip(t *testing.T, path, entry string, data []byte) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	type ent struct {
		name string
		b    []byte
	}
	var ents []ent
	for _, f := range zr.File {
		rc, _ := f.Open()
		b := make([]byte, f.UncompressedSize64)
		if _, err := rc.Read(b); err != nil && len(b) > 0 && err.Error() != "EOF" {
			t.Fatal(err)
		}
		rc.Close()
		if f.Name == entry {
			b = data
		}
		ents = append(ents, ent{f.Name, b})
	}
	zr.Close()
	out, _ := os.Create(path)
	zw := zip.NewWriter(out)
	for _, e := range ents {
		w, _ := zw.Create(e.name)
		w.Write(e.b)
	}
	zw.Close()
	out.Close()
}

func TestRocksNegative(t *testing.T) {
	cases := []struct {
		name   string
		src    string
		damage func(t *testing.T, ck string)
		want   error
		msg    string
	}{
		{"missing SST", "rocksdb", func(t *testing.T, ck string) { os.Remove(firstSST(t, filepath.Join(ck, "state/0/0"))) }, snapshotfmt.ErrCorrupt, "does not exist"},
		{"damaged SST data block", "rocksdb", func(t *testing.T, ck string) {
			editFile(t, firstSST(t, filepath.Join(ck, "state/0/1")), func(s string) string { b := []byte(s); b[20] ^= 0x40; return string(b) })
		}, snapshotfmt.ErrCorrupt, ".zip"},
		{"damaged SST filter block", "rocksdb", func(t *testing.T, ck string) {
			// the bloom filter sits after the data blocks: flip a byte in
			// the middle of the file's second half, before the footer
			editFile(t, firstSST(t, filepath.Join(ck, "state/0/1")), func(s string) string {
				b := []byte(s)
				b[filterOffset(t, b)] ^= 0x10
				return string(b)
			})
		}, snapshotfmt.ErrCorrupt, "filter"},
		{"truncated SST", "rocksdb", func(t *testing.T, ck string) {
			editFile(t, firstSST(t, filepath.Join(ck, "state/0/0")), func(s string) string { return s[:len(s)-9] })
		}, snapshotfmt.ErrCorrupt, "bytes, the snapshot says"},
		{"damaged zip", "rocksdb", func(t *testing.T, ck string) {
			editFile(t, filepath.Join(ck, "state/0/0/3.zip"), func(s string) string { b := []byte(s); b[len(b)/2] ^= 0x01; return string(b) })
		}, snapshotfmt.ErrCorrupt, "3.zip"},
		{"write-ahead log with data", "rocksdb", func(t *testing.T, ck string) {
			rezip(t, filepath.Join(ck, "state/0/0/3.zip"), "000004.log", []byte("not empty"))
		}, snapshotfmt.ErrUnsupported, "write-ahead log"},
		{"column family", "rocksdb", func(t *testing.T, ck string) {
			zp := filepath.Join(ck, "state/0/1/3.zip")
			zr, _ := zip.OpenReader(zp)
			var meta []byte
			for _, f := range zr.File {
				if f.Name == "metadata" {
					rc, _ := f.Open()
					meta = make([]byte, f.UncompressedSize64)
					rc.Read(meta)
					rc.Close()
				}
			}
			zr.Close()
			rezip(t, zp, "metadata", []byte(strings.Replace(string(meta), `"columnFamilyMapping":{}`, `"columnFamilyMapping":{"default":0,"countState":1}`, 1)))
		}, snapshotfmt.ErrUnsupported, "countState"},
		{"missing changelog", "agg_string_rocksdb_changelog", func(t *testing.T, ck string) { os.Remove(filepath.Join(ck, "state/0/1/2.changelog")) }, snapshotfmt.ErrCorrupt, "2.changelog"},
		{"damaged changelog", "agg_string_rocksdb_changelog", func(t *testing.T, ck string) {
			editFile(t, filepath.Join(ck, "state/0/0/3.changelog"), func(s string) string { b := []byte(s); b[30] ^= 0x40; return string(b) })
		}, snapshotfmt.ErrCorrupt, "3.changelog"},
		{"leftover above the committed version", "agg_string_rocksdb_changelog", func(t *testing.T, ck string) {
			b, _ := os.ReadFile(filepath.Join(ck, "state/0/0/3.changelog"))
			os.WriteFile(filepath.Join(ck, "state/0/0/5.changelog"), b, 0o644)
		}, snapshotfmt.ErrRefused, "5.changelog"},
		{"encoding version", "agg_string_rocksdb_changelog", func(t *testing.T, ck string) {
			// A put whose key starts with version byte 1 instead of 0.
			var rec []byte
			rec = appendRocksRecord(rec, []byte("k"), []byte("v"), false)
			rec[4] = 1
			writeChangelog(t, filepath.Join(ck, "state/0/0/3.changelog"), rec)
		}, snapshotfmt.ErrUnsupported, "encoding version 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ck := copyInterop(t, tc.src)
			tc.damage(t, ck)
			err := rewriteErr(t, ck)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

// filterOffset finds a byte inside the bloom filter block of a Spark SST:
// its bits, which the full-filter block starts with after the data blocks,
// are found by scanning for the first offset whose flip fails only
// VerifyMetaBlocks.
func filterOffset(t *testing.T, b []byte) int {
	t.Helper()
	for off := len(b) / 2; off < len(b)-60; off++ {
		d := bytes.Clone(b)
		d[off] ^= 0x10
		tab, err := rocksdbsst.Open(bytes.NewReader(d), int64(len(d)))
		if err != nil {
			continue
		}
		it := tab.NewIter()
		for it.Next() {
		}
		if it.Err() == nil && tab.VerifyMetaBlocks() != nil && strings.Contains(tab.VerifyMetaBlocks().Error(), "filter") {
			return off
		}
	}
	t.Fatal("no filter block byte found")
	return 0
}

func writeChangelog(t *testing.T, path string, records []byte) {
	t.Helper()
	w, err := newSnapWriter(path + ".new")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write(records); err != nil {
		t.Fatal(err)
	}
	if _, err := w.finish(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// A session window's keys are split in two rows by RocksDB's prefix-scan
// encoder: refused by name rather than misread.
func TestRocksSessionWindowRefused(t *testing.T) {
	ck := copyInterop(t, "agg_string_rocksdb_changelog")
	editFile(t, filepath.Join(ck, "state/0/_metadata/metadata"), func(s string) string {
		return strings.Replace(s, `"numColsPrefixKey":0`, `"numColsPrefixKey":1`, 1)
	})
	_, err := Verify(context.Background(), ck, ScanOptions{})
	if !errors.Is(err, snapshotfmt.ErrUnsupported) || !strings.Contains(err.Error(), "session window") {
		t.Fatalf("verify: %v", err)
	}
	if err := rewriteErr(t, ck); !errors.Is(err, snapshotfmt.ErrUnsupported) {
		t.Fatalf("rewrite: %v", err)
	}
}

// A batch that wrote its changelogs but never committed: refused, or with
// SkipUncommitted its files are dropped from the copy and the state is the
// committed one (the source keeps everything).
func TestRocksSkipUncommitted(t *testing.T) {
	src := copyInterop(t, "agg_string_rocksdb_changelog")
	os.Remove(filepath.Join(src, "commits", "2"))
	os.Remove(filepath.Join(src, "commits", ".2.crc"))
	before := treeDigest(t, src)
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 4, SkipUncommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if treeDigest(t, src) != before {
		t.Fatal("source changed")
	}
	if res.LastCommitted != 1 || res.NewBatch != 3 || res.StateVersion != 4 {
		t.Fatalf("%+v", res)
	}
	c, _ := Open(src)
	want, err := c.scanAt(context.Background(), ScanOptions{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := Open(dst)
	got, err := nc.Scan(context.Background(), ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := compareReports(c, nc, want, got); !d.Equal {
		t.Fatalf("%v", d.Differences)
	}
	// version 3 of an old partition is now an empty changelog
	n, err := ReadStateFile(filepath.Join(dst, "state/0/0/3.changelog"), func(k, v []byte, del bool) error { return nil })
	if err != nil || n != 0 {
		t.Fatalf("3.changelog: %d records, %v", n, err)
	}
}

// Checkpoints of the RocksDB provider written by pyspark 3.5.9 (no
// operator metadata: the operator is inferred, and the provider's SSTs/
// directory is not a store): the same rows as the HDFS-backed checkpoint
// of the same query and input, before and after a rewrite. Spark 3.5
// restarted these rewrites correctly (interop/spark/restart35.py).
func TestRocksSpark35(t *testing.T) {
	ctx := context.Background()
	for name, twin := range map[string]string{
		"agg_string_rocksdb": "agg_string", "agg_string_rocksdb_changelog": "agg_string", "two_op_rocksdb": "two_op",
	} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(sharedCheckpoints, "spark35", name, "checkpoint")
			rep, err := Verify(ctx, src, ScanOptions{})
			if err != nil || rep.FindingsTotal != 0 || rep.Provider != RocksDBProvider {
				t.Fatalf("verify: %+v %v", rep, err)
			}
			for _, or := range rep.Operators {
				if !or.Inferred || len(or.Stores) != 1 || or.Stores[0].Name != "default" {
					t.Fatalf("operator %+v", or)
				}
			}
			hdfs := filepath.Join(sharedCheckpoints, "spark35", twin, "checkpoint")
			if eq, err := Equal(ctx, src, hdfs, ScanOptions{}); err != nil || !eq.Equal {
				t.Fatalf("against the HDFS twin: %+v %v", eq, err)
			}
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := Rewrite(ctx, src, dst, RewriteOptions{Partitions: 8}); err != nil {
				t.Fatal(err)
			}
			if eq, err := Equal(ctx, dst, hdfs, ScanOptions{}); err != nil || !eq.Equal {
				t.Fatalf("rewritten, against the HDFS twin: %+v %v", eq, err)
			}
		})
	}
}
