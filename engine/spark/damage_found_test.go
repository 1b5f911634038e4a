package spark

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
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

// TestDamagedOperatorMetadataIsCorrupt: a flipped byte in a key of the
// operator metadata JSON ("operatorInf)", "YtoreName") still parsed, as an
// operator named "" with a store named "": inspect exit 0 listing it,
// verify a finding ("does not support operator \"\""), rewrite refused as
// unsupported (found by internal/crashtest TestDamagedCheckpointFuzzSpark,
// seed 1). Spark refuses such a file; now it is ErrCorrupt, naming the
// damage, for v1 and v2 (transformWithState) metadata alike.
func TestDamagedOperatorMetadataIsCorrupt(t *testing.T) {
	cases := []struct {
		name, ckpt, file, old, new string
	}{
		{"operatorInfo key v1", "agg_string", "state/0/_metadata/metadata", `"operatorInfo"`, `"operatorInf)"`},
		{"operatorName key v1", "agg_string", "state/0/_metadata/metadata", `"operatorName"`, `"operatorNamX"`},
		{"storeName key v1", "agg_string", "state/0/_metadata/metadata", `"storeName"`, `"YtoreName"`},
		{"operatorId v1", "two_op", "state/1/_metadata/metadata", `"operatorId":1`, `"operatorId":0`},
		{"operatorName key v2", "tws", "state/0/_metadata/v2/2", `"operatorName"`, `"operatorNamX"`},
		{"storeName key v2", "tws", "state/0/_metadata/v2/2", `"storeName"`, `"YtoreName"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := copyTree(context.Background(), filepath.Join("testdata", "interop", tc.ckpt, "checkpoint"), dir); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(dir); err != nil {
				t.Fatalf("the undamaged copy: %v", err)
			}
			p := filepath.Join(dir, tc.file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tc.old)) {
				t.Fatalf("%s holds no %s: %s", tc.file, tc.old, b)
			}
			if err := os.WriteFile(p, bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir)
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("Open of damaged operator metadata: %v, want ErrCorrupt", err)
			}
		})
	}
}
