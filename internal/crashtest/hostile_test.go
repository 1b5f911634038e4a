package crashtest

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// TestHostileBigEntries: keys and values of several megabytes go through
// every command end to end: written by the writer, rewritten (a shuffle
// with a budget smaller than one entry), verified deep and against the
// source, exported to Parquet, imported back and proved equal.
func TestHostileBigEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("moves ~100 MB through the binary")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	part, err := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 4)
	if err != nil {
		t.Fatal(err)
	}
	states := []snapshotfmt.State{
		{ID: 1, Step: "big", Name: "blob", Kind: snapshotfmt.KindValue},
		{ID: 2, Step: "big", Name: "map", Kind: snapshotfmt.KindMap},
	}
	w, err := writer.Create(src, writer.Header{Partitioning: part, WidthAtWrite: 2, States: states, Tool: "crashtest"}, writer.Options{FileSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	blob := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	type kv struct{ k, v []byte }
	var entries []kv
	for i := range 12 {
		// Keys of 1 to 3 MiB for a few entries (a file's bounds hold
		// whole keys, hex, in the manifest, which is bounded at 64 MiB),
		// small keys for the rest; every value is 2 to 4.7 MiB.
		key := []byte{byte(i)}
		if i%4 == 1 {
			key = blob(1<<20 + i*200_000)
		}
		entries = append(entries,
			kv{snapshotfmt.EncodeKey(part.Bucket(key), 1, key, nil), blob(2<<20 + i*250_000)}, // 2 to 4.7 MiB values
			kv{snapshotfmt.EncodeKey(part.Bucket(key), 2, key, blob(1<<20)), []byte("small")},
		)
	}
	sort.Slice(entries, func(i, j int) bool { return bytes.Compare(entries[i].k, entries[j].k) < 0 })
	bw := w.NewBucketWriter()
	for _, e := range entries {
		if err := bw.Add(e.k, e.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteWorkerState("source", "offsets", snapshotfmt.Rule("split"), [][][]byte{{blob(3 << 20)}, {}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out")
	mustRun(t, "rewrite", src, "--buckets", "7", "--out", out, "--memory", "1MiB", "--file-size", "64MiB", "--quiet")
	mustRun(t, "verify", out, "--deep", "--quiet")
	mustRun(t, "verify", out, "--against", src, "--quiet")
	mustRun(t, "export", src, "--format", "jsonl", "--out", filepath.Join(dir, "export.jsonl"), "--quiet")
	for _, format := range []string{"parquet", "arrow"} {
		exp := filepath.Join(dir, "export."+format)
		mustRun(t, "export", src, "--format", format, "--out", exp, "--quiet")
		back := filepath.Join(dir, "back-"+format)
		// Multi-MiB rows are above what import holds at --memory 1MiB (a
		// row takes at most 1/16 of the budget, a footer 1/32: the README's
		// Limits): refused up front, naming the budget that works.
		if code, out := run(t, "import", exp, "--buckets", "3", "--out", back, "--memory", "1MiB", "--quiet"); code != 2 || !strings.Contains(out, "--memory") {
			t.Fatalf("import of multi-MiB rows at --memory 1MiB: exit %d, want 2 naming --memory:\n%s", code, out)
		}
		mustRun(t, "import", exp, "--buckets", "3", "--out", back, "--memory", "256MiB", "--quiet")
		mustRun(t, "verify", back, "--deep", "--quiet")
		mustRun(t, "verify", back, "--against", src, "--quiet")
	}
}

// TestHostileCommands runs the reading commands over hostile snapshots
// through the binary: each exits 1 (findings) or 2 (damaged input), never
// crashes, and names the problem.
func TestHostileCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	base := filepath.Join(t.TempDir(), "base")
	mustRun(t, "generate", "--out", base, "--buckets", "8", "--width", "2", "--keys", "300", "--file-size", "8KiB", "--quiet")
	readers := [][]string{{"verify", "--deep"}, {"export", "--out", "x.parquet"}, {"rewrite", "--buckets", "3", "--out", "x"}, {"load", "--width", "2", "--into", "x"}}
	all := append([][]string{{"inspect"}, {"plan"}}, readers...)
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
		cmds   [][]string // inspect and plan read only the manifest
	}{
		{"data directory links outside", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "data")
			if err := os.Rename(filepath.Join(dir, "data"), outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "data")); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link", readers},
		{"manifest of 100 MB", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, snapshotfmt.ManifestName), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(100 << 20); err != nil { // sparse: zeros after the JSON
				t.Fatal(err)
			}
		}, "MiB", all},
		{"entry count 2^62 (resealed)", func(t *testing.T, dir string) {
			mp := filepath.Join(dir, snapshotfmt.ManifestName)
			data, err := os.ReadFile(mp)
			if err != nil {
				t.Fatal(err)
			}
			m, err := snapshotfmt.DecodeManifest(data)
			if err != nil {
				t.Fatal(err)
			}
			d := uint64(1)<<62 - m.Files[0].Entries
			m.Files[0].Entries += d
			m.BucketEntries[m.Files[0].BucketLo] += d
			m.States[0].Entries += d
			if data, err = m.Encode(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(mp, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "461168601842738", readers}, // the count, or a sum including it
		{"manifest that is a directory", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, snapshotfmt.ManifestName))
			if err := os.Mkdir(filepath.Join(dir, snapshotfmt.ManifestName), 0o755); err != nil {
				t.Fatal(err)
			}
		}, snapshotfmt.ManifestName, all},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			if out, err := runCopy(base, dir); err != nil {
				t.Fatalf("copy: %v %s", err, out)
			}
			c.damage(t, dir)
			for _, cmd := range c.cmds {
				args := []string{cmd[0], dir}
				for _, a := range cmd[1:] {
					if a == "x" || a == "x.parquet" {
						a = filepath.Join(t.TempDir(), a)
					}
					args = append(args, a)
				}
				code, out := run(t, append(args, "--quiet")...)
				if code != 1 && code != 2 {
					t.Errorf("%s: exit %d, want 1 or 2\n%s", args[0], code, out)
				}
				if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
					t.Errorf("%s crashed:\n%s", args[0], out)
				}
				if !strings.Contains(out, c.want) {
					t.Errorf("%s: output does not say %q:\n%s", args[0], c.want, out)
				}
			}
		})
	}
}

func runCopy(src, dst string) ([]byte, error) {
	return exec.Command("cp", "-a", src, dst).CombinedOutput()
}

// TestLockRefusesSecondRun: while one run holds a target (stopped with
// SIGSTOP once it holds its lock), a second run on the same target is
// refused with exit 3 and leaves the first one's work alone; the first
// then completes and verifies.
func TestLockRefusesSecondRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	mustRun(t, "generate", "--out", src, "--buckets", "8", "--keys", "20000", "--file-size", "64KiB", "--quiet")
	target := filepath.Join(dir, "out")
	first := exec.Command(bin, "rewrite", src, "--buckets", "12", "--out", target, "--quiet")
	var out bytes.Buffer
	first.Stdout, first.Stderr = &out, &out
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	// The lock file appears before it is locked; the temporary directory
	// is made only once the lock is held, so wait for that (or for a run
	// so quick that it already published).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if tmps, _ := filepath.Glob(filepath.Join(dir, ".out.rebucket-tmp-*")); len(tmps) > 0 {
			break
		}
		if _, err := os.Stat(target); err == nil {
			break
		}
		if time.Now().After(deadline) {
			first.Process.Kill()
			t.Fatal("the first run never took its lock")
		}
		time.Sleep(time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, second := run(t, "rewrite", src, "--buckets", "12", "--out", target, "--quiet")
	if err := first.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	// The first may have published before it was stopped: then the second
	// is refused as a target that exists, also exit 3.
	if code != 3 {
		t.Fatalf("second run: exit %d, want 3\n%s", code, second)
	}
	if !strings.Contains(second, "lock") && !strings.Contains(second, "exists") {
		t.Errorf("second run does not say why: %s", second)
	}
	t.Logf("second run: %s", strings.TrimSpace(second))
	checkSnapshot(t, &fixture{src: src}, target)
}
