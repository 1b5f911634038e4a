package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/internal/fsx"
)

// TestFlinkExportRemovesDeadRunsLeftovers: a Flink export killed mid-run
// left its temporary file (.rebucket-export-N) beside the output and no
// later run removed it (found by TestCrashKillPointsFlink). Now it writes
// in a locked run directory, which the next export to the same name
// removes once its run is dead, and leaves nothing of its own.
func TestFlinkExportRemovesDeadRunsLeftovers(t *testing.T) {
	src := flinkSample(t, "probe-heap-files")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	prefix := ".out.parquet.rebucket-tmp-"
	// What a SIGKILLed run leaves: its run directory, lock not held.
	dead := filepath.Join(dir, fsx.TempName(prefix))
	if err := os.Mkdir(dead, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fsx.LockName, "out.parquet"} {
		if err := os.WriteFile(filepath.Join(dead, f), []byte("partial"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	live, err := fsx.MkdirRun(nil, dir, prefix, fsx.DirPerm)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()

	if o, code := runRoot(t, "export", src, "--out", out); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, o)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != filepath.Base(live.Path) || names[1] != "out.parquet" {
		t.Fatalf("after the export the directory holds %v, want only the live run's %s and out.parquet", names, filepath.Base(live.Path))
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("out.parquet: %v %v", st, err)
	}
}
