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
var realCheckpoints = []string{"agg_str", "agg_str_int", "agg_long", "dedup"}

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
			if rep.Partitions != 2 || rep.LastCommitted != 2 || len(rep.Operators) != 1 {
				t.Fatalf("report %+v", rep)
			}
			if rep.Rows == 0 {
				t.Fatal("no rows")
			}
			for _, sr := range rep.Operators[0].Stores {
				for p, pl := range sr.Partitions {
					if pl.Rows == 0 {
						t.Errorf("partition %d empty", p)
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
			if !res.Verified || res.NewBatch != 3 || res.StateVersion != 4 {
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
			for q := range m {
				if _, err := os.Stat(filepath.Join(dst, "state", "0", itoa(q), "4.snapshot")); err != nil {
					t.Fatalf("partition %d: %v", q, err)
				}
			}
		}
	}
}
