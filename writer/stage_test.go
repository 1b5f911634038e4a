package writer_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// siblings lists the names in dir other than keep.
func siblings(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !slices.Contains(keep, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func header(t *testing.T) writer.Header {
	p, err := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 8)
	if err != nil {
		t.Fatal(err)
	}
	return writer.Header{Partitioning: p, WidthAtWrite: 2, States: testStates, Tool: "test"}
}

func TestTargetChecks(t *testing.T) {
	parent := t.TempDir()
	full := filepath.Join(parent, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "old.txt"), []byte("old"), 0o644)
	file := filepath.Join(parent, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := filepath.Join(parent, "empty")
	os.Mkdir(empty, 0o755)

	for _, tc := range []struct {
		name   string
		target string
		force  bool
		want   error
	}{
		{"non-empty target", full, false, writer.ErrTargetExists},
		{"file target", file, false, writer.ErrTargetExists},
		{"file target with force", file, true, snapshotfmt.ErrRefused},
		{"missing parent", filepath.Join(parent, "no", "such"), false, snapshotfmt.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := writer.Create(tc.target, header(t), writer.Options{Force: tc.force})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Create: %v, want %v", err, tc.want)
			}
			if tc.want == writer.ErrTargetExists && !errors.Is(err, snapshotfmt.ErrRefused) {
				t.Errorf("ErrTargetExists is not ErrRefused: %v", err)
			}
			// A refusal leaves nothing behind: no temp dir, no lock.
			if left := siblings(t, parent, "full", "file", "empty"); len(left) != 0 {
				t.Errorf("refusal left %v", left)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(full, "old.txt")); string(b) != "old" {
		t.Error("a refused run touched the existing target")
	}

	// An empty directory is an acceptable target.
	s, err := writer.Create(empty, header(t), writer.Options{})
	if err != nil {
		t.Fatalf("empty target: %v", err)
	}
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Open(empty, reader.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestForceReplaces(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	os.Mkdir(target, 0o755)
	os.WriteFile(filepath.Join(target, "old.txt"), []byte("old"), 0o644)
	// --force replaces only a snapshot (see TestForceReplacesOnlyOwnKind).
	os.WriteFile(filepath.Join(target, "MANIFEST.json"), []byte(`{"format": "rebucket-snapshot", "version": 1}`), 0o644)
	s, err := writer.Create(target, header(t), writer.Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	// Until the commit, the old target is intact.
	if _, err := os.Stat(filepath.Join(target, "old.txt")); err != nil {
		t.Fatalf("old target changed before commit: %v", err)
	}
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old content survived: %v", err)
	}
	if _, err := reader.Open(target, reader.Options{}); err != nil {
		t.Fatal(err)
	}
	if left := siblings(t, parent, "snap"); len(left) != 0 {
		t.Errorf("force left %v beside the target", left)
	}
}

func TestPublishLeavesOnlyTarget(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	s, err := writer.Create(target, header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tmp := s.Dir()
	if !strings.HasPrefix(filepath.Base(tmp), ".snap.rebucket-tmp-") || filepath.Dir(tmp) != parent {
		t.Errorf("temporary directory %s is not .snap.rebucket-tmp-RUNID beside the target", tmp)
	}
	var mk writer.Marker
	data, err := os.ReadFile(filepath.Join(tmp, writer.MarkerName))
	if err != nil || json.Unmarshal(data, &mk) != nil || mk.PID != os.Getpid() || mk.Target != target || mk.RunID == "" {
		t.Fatalf("marker %s: %+v, %v", data, mk, err)
	}
	if _, err := os.Stat(filepath.Join(parent, ".snap.rebucket.lock")); err != nil {
		t.Errorf("no lock file while writing: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target visible before commit: %v", err)
	}
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if left := siblings(t, parent, "snap"); len(left) != 0 {
		t.Errorf("commit left %v", left)
	}
	if _, err := os.Stat(filepath.Join(target, writer.MarkerName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the published snapshot still has its run marker")
	}
	for _, d := range []string{snapshotfmt.ManifestName, snapshotfmt.DataDir, snapshotfmt.WorkersDir} {
		if _, err := os.Stat(filepath.Join(target, d)); err != nil {
			t.Error(err)
		}
	}
}

func TestLockHeld(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	st, err := writer.Begin(target, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = writer.Begin(target, false)
	if !errors.Is(err, writer.ErrLocked) || !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("second Begin: %v, want ErrLocked", err)
	}
	if _, err := writer.Create(target, header(t), writer.Options{}); !errors.Is(err, writer.ErrLocked) {
		t.Fatalf("Create under a held lock: %v, want ErrLocked", err)
	}
	// The holder's temporary directory survives the refused attempts.
	if _, err := os.Stat(st.Dir()); err != nil {
		t.Fatalf("holder's directory removed: %v", err)
	}
	st.Abort()
	st2, err := writer.Begin(target, false)
	if err != nil {
		t.Fatalf("Begin after Abort: %v", err)
	}
	st2.Abort()
	if left := siblings(t, parent); len(left) != 0 {
		t.Errorf("abort left %v", left)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	s, err := writer.Create(target, header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bw := s.NewBucketWriter()
	if err := bw.Add(snapshotfmt.EncodeKey(0, 1, []byte("k"), nil), []byte("v")); err != nil {
		t.Fatal(err)
	}
	bw.Abort()
	s.Abort()
	if left := siblings(t, parent); len(left) != 0 {
		t.Errorf("abort left %v", left)
	}
	s.Abort() // a second Abort is harmless
}

// TestCommitFailureLeavesNothing: two writers on one bucket produce
// overlapping files; Commit refuses them and removes the temporary dir.
func TestCommitFailureLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	s, err := writer.Create(target, header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Writer A covers buckets 0..1, writer B bucket 1 again: distinct file
	// names, overlapping key ranges.
	for _, keys := range [][][]byte{
		{snapshotfmt.EncodeKey(0, 1, []byte("a"), nil), snapshotfmt.EncodeKey(1, 1, []byte("b"), nil)},
		{snapshotfmt.EncodeKey(1, 1, []byte("a"), nil)},
	} {
		bw := s.NewBucketWriter()
		for _, k := range keys {
			if err := bw.Add(k, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if err := bw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(); err == nil {
		t.Fatal("Commit accepted overlapping files")
	}
	if left := siblings(t, parent); len(left) != 0 {
		t.Errorf("failed commit left %v", left)
	}
}

func TestCommitWithOpenWriter(t *testing.T) {
	parent := t.TempDir()
	s, err := writer.Create(filepath.Join(parent, "snap"), header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.NewBucketWriter()
	if _, err := s.Commit(); err == nil {
		t.Fatal("Commit with an open writer succeeded")
	}
	if left := siblings(t, parent); len(left) != 0 {
		t.Errorf("failed commit left %v", left)
	}
}

func TestAddErrors(t *testing.T) {
	s, err := writer.Create(filepath.Join(t.TempDir(), "snap"), header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	bw := s.NewBucketWriter()
	defer bw.Abort()
	k := func(b uint32, st uint16, key string) []byte { return snapshotfmt.EncodeKey(b, st, []byte(key), nil) }
	if err := bw.Add(k(1, 1, "m"), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  []byte
		want error
	}{
		{"same key again", k(1, 1, "m"), writer.ErrOutOfOrder},
		{"lower key", k(1, 1, "a"), writer.ErrOutOfOrder},
		{"lower bucket", k(0, 7, "zzz"), writer.ErrOutOfOrder},
		{"bucket outside N", k(8, 1, "a"), snapshotfmt.ErrInvalidArgument},
		{"unknown state", k(2, 3, "a"), snapshotfmt.ErrInvalidArgument},
		{"malformed key", []byte{0, 0, 0, 2, 0, 1, 0, 0, 0, 9}, snapshotfmt.ErrCorrupt},
	} {
		if err := bw.Add(tc.key, []byte("v")); !errors.Is(err, tc.want) {
			t.Errorf("%s: Add = %v, want %v", tc.name, err, tc.want)
		}
	}
	// After refused keys the writer still accepts the next correct one.
	if err := bw.Add(k(1, 1, "n"), nil); err != nil {
		t.Errorf("Add after refusals: %v", err)
	}
}

func TestWorkerStateWidth(t *testing.T) {
	s, err := writer.Create(filepath.Join(t.TempDir(), "snap"), header(t), writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	if err := s.WriteWorkerState("src", "off", snapshotfmt.RuleSplit, make([][][]byte, 3)); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Errorf("3 workers' items at width 2: %v", err)
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

func TestStaleTempDirs(t *testing.T) {
	parent := t.TempDir()
	mk := func(name string, m *writer.Marker) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(p, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			data, _ := json.Marshal(m)
			os.WriteFile(filepath.Join(p, writer.MarkerName), data, 0o644)
		}
		return p
	}
	dead := mk(".snap.rebucket-tmp-dead", &writer.Marker{RunID: "dead", PID: deadPID(t)})
	noMarker := mk(".snap.rebucket-tmp-nomarker", nil)
	alive := mk(".snap.rebucket-tmp-alive", &writer.Marker{RunID: "alive", PID: os.Getppid()})
	other := mk(".other.rebucket-tmp-dead", &writer.Marker{RunID: "x", PID: deadPID(t)})

	st, err := writer.Begin(filepath.Join(parent, "snap"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale directory of a dead run survived: %v", err)
	}
	if !slices.Contains(st.Removed, dead) {
		t.Errorf("Removed = %v, want %s", st.Removed, dead)
	}
	for _, p := range []string{noMarker, alive} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
		if !slices.Contains(st.Leftover, p) {
			t.Errorf("Leftover = %v, want %s", st.Leftover, p)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another target's directory was touched: %v", err)
	}
}

// TestFormatDocumentsPublication: the names publication uses on disk are
// the ones FORMAT.md section 9 documents.
func TestFormatDocumentsPublication(t *testing.T) {
	data, err := os.ReadFile("../snapshotfmt/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"`" + writer.MarkerName + "`", "`.NAME.rebucket-tmp-RUNID`", "`.NAME.rebucket.lock`", "RENAME_EXCHANGE"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("FORMAT.md does not mention %s", s)
		}
	}
}
