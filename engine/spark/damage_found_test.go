package spark

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/internal/fsx"
)

// deadSparkRunDir makes what a SIGKILLed rewrite leaves beside its target:
// a run directory named TempName(TempPrefix) whose lock file nobody holds,
// holding a partial copy.
func deadSparkRunDir(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, fsx.TempName(TempPrefix))
	if err := os.MkdirAll(filepath.Join(p, "checkpoint", "offsets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fsx.LockName, "checkpoint/metadata", "checkpoint/offsets/0"} {
		if err := os.WriteFile(filepath.Join(p, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestRewriteRemovesDeadRunsLeftovers: a Spark rewrite killed mid-run left
// its .rebucket-spark-* copy beside the target, and no later run removed
// it (found by internal/crashtest TestCrashKillPointsSpark: the staging
// directory was a bare TempName, with no lock for RemoveStale to go by).
// Now every rewrite removes the run directories of dead runs, leaves a
// live run's alone, and leaves none of its own, nor its lock file in the
// target.
func TestRewriteRemovesDeadRunsLeftovers(t *testing.T) {
	for _, name := range []string{"agg_string", "rocksdb"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("testdata", "interop", name, "checkpoint")
			parent := t.TempDir()
			dead := deadSparkRunDir(t, parent)
			live, err := fsx.MkdirRun(nil, parent, TempPrefix, 0o700)
			if err != nil {
				t.Fatal(err)
			}
			defer live.Remove()

			dst := filepath.Join(parent, "out")
			if _, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 3}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(dead); !os.IsNotExist(err) {
				t.Errorf("dead run's %s is still there (%v)", dead, err)
			}
			if _, err := os.Lstat(live.Path); err != nil {
				t.Errorf("a live run's %s was removed: %v", live.Path, err)
			}
			ents, _ := os.ReadDir(parent)
			for _, e := range ents {
				if e.Name() != "out" && e.Name() != filepath.Base(live.Path) {
					t.Errorf("rewrite left %s beside the target", e.Name())
				}
			}
			if _, err := os.Lstat(filepath.Join(dst, fsx.LockName)); err == nil {
				t.Errorf("the target holds the run's lock file")
			}
			eq, err := Equal(context.Background(), src, dst, ScanOptions{})
			if err != nil || !eq.Equal {
				t.Fatalf("rewritten checkpoint not equal to the source: %v %+v", err, eq)
			}
		})
	}
}
