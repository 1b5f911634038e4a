package flink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/fsx"
)

// deadRunDir makes what a SIGKILLed run leaves: a run directory named
// TempName(prefix) whose lock file nobody holds, with a file in it.
func deadRunDir(t *testing.T, dir, prefix string) string {
	t.Helper()
	p := filepath.Join(dir, fsx.TempName(prefix))
	if err := os.MkdirAll(filepath.Join(p, "savepoint"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fsx.LockName, "savepoint/keyed-x-0-of-1", "spill"} {
		if err := os.WriteFile(filepath.Join(p, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestRewriteRemovesDeadRunsLeftovers: a Flink rewrite killed mid-run left
// its staging directory beside the target and its spill files in --tmp,
// and no later run removed them (found by TestCrashKillPointsFlink). Now
// every rewrite removes the run directories of dead runs, leaves a live
// run's alone, and leaves none of its own, nor its lock file in the target.
func TestRewriteRemovesDeadRunsLeftovers(t *testing.T) {
	parent, spill := t.TempDir(), t.TempDir()
	deadStage := deadRunDir(t, parent, TempPrefix)
	deadSpill := deadRunDir(t, spill, SpillPrefix)
	live, err := fsx.MkdirRun(nil, parent, TempPrefix, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	liveSpill, err := fsx.MkdirRun(nil, spill, SpillPrefix, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	defer liveSpill.Remove()

	dst := filepath.Join(parent, "out")
	res, err := Rewrite(context.Background(), "testdata/probe-heap-files", dst, RewriteOptions{MaxParallelism: 128, Memory: 1 << 10, TmpDir: spill, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.SpilledRuns == 0 {
		t.Fatalf("a 1 KiB budget did not spill: %+v", res)
	}
	for _, p := range []string{deadStage, deadSpill} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("dead run's %s is still there (%v)", p, err)
		}
	}
	for _, p := range []string{live.Path, liveSpill.Path} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("a live run's %s was removed: %v", p, err)
		}
	}
	for dir, keep := range map[string]string{parent: filepath.Base(live.Path), spill: filepath.Base(liveSpill.Path)} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != keep && e.Name() != "out" {
				t.Errorf("rewrite left %s in %s", e.Name(), dir)
			}
		}
	}
	ents, _ := os.ReadDir(dst)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("target holds %s", e.Name())
		}
	}
	if eq, err := Equal(context.Background(), "testdata/probe-heap-files", dst, ScanOptions{}); err != nil || !eq.Equal {
		t.Fatalf("equal: %v %+v", err, eq)
	}
}
