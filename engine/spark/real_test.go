package spark

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// realCheckpoints are checkpoints written by pyspark 4.3.0 (local[2],
// 2 partitions, 3 batches of 40 rows over 50 keys, minDeltasForSnapshot=2)
// by testdata/make_checkpoints.py: they hold .delta and .snapshot files.
// make_checkpoints2.py adds a stream-stream join (4 stores), a session
// window (key prefix), dropDuplicatesWithinWatermark and a query with two
// stateful operators (dropDuplicates then an aggregation).
var realCheckpoints = []string{"agg_str", "agg_str_int", "agg_long", "dedup", "join", "session", "dedup_wm", "two_ops"}

// realShape is the last committed batch and operator count of each.
var realShape = map[string][2]int{
	"agg_str": {2, 1}, "agg_str_int": {2, 1}, "agg_long": {2, 1}, "dedup": {2, 1},
	"join": {2, 1}, "session": {5, 1}, "dedup_wm": {5, 1}, "two_ops": {2, 2},
}

func realDir(t *testing.T, name string) string {
	d := filepath.Join("testdata", "real", name)
	if _, err := os.Stat(d); err != nil {
		t.Skipf("no %s: %v", d, err)
	}
	return d
}

func TestRealVerify(t *testing.T) {
	for _, name := range realCheckpoints {
		t.Run(name, func(t *testing.T) {
			rep, err := Verify(context.Background(), realDir(t, name), ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.FindingsTotal != 0 {
				t.Fatalf("findings: %v", rep.Findings)
			}
			if sh := realShape[name]; rep.Partitions != 2 || rep.LastCommitted != int64(sh[0]) || len(rep.Operators) != sh[1] {
				t.Fatalf("report %+v", rep)
			}
			if rep.Rows == 0 {
				t.Fatal("no rows")
			}
			for _, or := range rep.Operators {
				if or.Unsupported != "" {
					t.Errorf("operator %d: %s", or.ID, or.Unsupported)
				}
				for _, sr := range or.Stores {
					if len(sr.PartitionBy) == 0 {
						t.Errorf("store %s: no partition key", sr.Name)
					}
					for p, pl := range sr.Partitions {
						if pl.Rows == 0 {
							t.Errorf("store %s partition %d empty", sr.Name, p)
						}
					}
				}
			}
			t.Logf("%s: %d rows, key %s value %s", name, rep.Rows, rep.Operators[0].Stores[0].KeySchema, rep.Operators[0].Stores[0].ValueSchema)
		})
	}
}

func TestRealRewrite(t *testing.T) {
	for _, name := range realCheckpoints {
		for _, m := range []int{8, 3, 1} {
			src := realDir(t, name)
			dst := filepath.Join(t.TempDir(), "out")
			res, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: m})
			if err != nil {
				t.Fatalf("%s to %d: %v", name, m, err)
			}
			c := int64(realShape[name][0])
			if !res.Verified || res.NewBatch != c+1 || res.StateVersion != c+2 {
				t.Fatalf("result %+v", res)
			}
			eq, err := Equal(context.Background(), src, dst, ScanOptions{})
			if err != nil || !eq.Equal {
				t.Fatalf("%s to %d: equal %+v %v", name, m, eq, err)
			}
			rep, err := Verify(context.Background(), dst, ScanOptions{})
			if err != nil || rep.FindingsTotal != 0 || rep.Partitions != m {
				t.Fatalf("%s to %d: verify %+v %v", name, m, rep, err)
			}
			nc, err := Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range nc.Operators {
				for _, s := range op.Stores {
					for q := range m {
						if _, err := os.Stat(filepath.Join(s.Dir(op.Dir, q), itoa(int(c+2))+".snapshot")); err != nil {
							t.Fatalf("%s: partition %d: %v", name, q, err)
						}
					}
				}
			}
		}
	}
}

// Checkpoints written by pyspark 3.5.9 (make_checkpoints.py, same
// queries): no operator metadata, so the operator is inferred.
func TestReal35(t *testing.T) {
	for _, name := range []string{"agg_str", "agg_str_int", "agg_long", "dedup"} {
		src := filepath.Join("testdata", "real35", name)
		rep, err := Verify(context.Background(), src, ScanOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.FindingsTotal != 0 || rep.Rows != 50 || !rep.Operators[0].Inferred {
			t.Fatalf("%s: %+v", name, rep)
		}
		dst := filepath.Join(t.TempDir(), "out")
		if _, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// Chained rewrites (2 → 8 → 3 → 2) keep the rows, and each result is a
// checkpoint like any other.
func TestChainedRewrite(t *testing.T) {
	src := realDir(t, "join")
	prev := src
	for i, m := range []int{8, 3, 2} {
		dst := filepath.Join(t.TempDir(), itoa(i))
		res, err := Rewrite(context.Background(), prev, dst, RewriteOptions{Partitions: m})
		if err != nil {
			t.Fatalf("to %d: %v", m, err)
		}
		if res.NewBatch != int64(3+i) {
			t.Fatalf("to %d: new batch %d", m, res.NewBatch)
		}
		prev = dst
	}
	eq, err := Equal(context.Background(), src, prev, ScanOptions{})
	if err != nil || !eq.Equal {
		t.Fatalf("%+v %v", eq, err)
	}
}
