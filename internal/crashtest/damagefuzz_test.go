package crashtest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
)

// TestDamagedTableFuzz flips bytes in data files of a snapshot, reseals its
// manifest (so every whole-file checksum matches and the damage reaches the
// table reader, Pebble's included), and runs every reading command on it
// through the binary. None may panic; none may exit 0 with output other
// than the undamaged snapshot's; a command that reads the damaged table
// exits 2 naming the file (verify: 1 with a finding, or 2); a failed run
// leaves no target and no temporary directory.
//
// An oracle decides what the damage is: reading every entry in-process.
// If that fails (the usual case: every block carries a checksum), every
// command that reads all entries must fail; if it succeeds with the same
// entries (a flip in a part no read uses), commands may succeed but must
// print what they print for the undamaged snapshot.
//
// REBUCKET_FUZZ_ITERS sets the iterations (default 40, under a minute on
// two busy cores) and REBUCKET_FUZZ_SEED the seed.
func TestDamagedTableFuzz(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	iters := 40
	if s := os.Getenv("REBUCKET_FUZZ_ITERS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			iters = n
		}
	}
	var fseed uint64 = 1
	if s := os.Getenv("REBUCKET_FUZZ_SEED"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			fseed = n
		}
	}
	root := t.TempDir()
	base := filepath.Join(root, "base")
	mustRun(t, "generate", "--out", base, "--buckets", "8", "--width", "2", "--keys", "300", "--file-size", "8KiB", "--quiet")
	snap := filepath.Join(root, "snap") // every damaged copy, at one path so outputs compare
	copyTree(t, base, snap)
	baseEntries := entryDigest(t, snap)
	const key = "user-000000005"
	want := map[string]string{
		"export": string(mustReadRun(t, filepath.Join(root, "base.jsonl"), "export", snap, "--format", "jsonl", "--out", filepath.Join(root, "base.jsonl"), "--quiet")),
		"locate": mustRun(t, "locate", snap, key, "--json"),
		"load":   loadDigest(t, filepath.Join(root, "base.load"), snap),
	}
	os.RemoveAll(snap)

	rng := rand.New(rand.NewPCG(fseed, 0xf1a5))
	start := time.Now()
	var damaged, benign, runs int
	exits := map[string]map[int]int{}
	for it := range iters {
		copyTree(t, base, snap)
		files, _ := filepath.Glob(filepath.Join(snap, "data", "*.sst"))
		slices.Sort(files)
		victim := files[rng.IntN(len(files))]
		data, err := os.ReadFile(victim)
		if err != nil {
			t.Fatal(err)
		}
		var flips []string
		for range 1 + rng.IntN(3) {
			off := rng.IntN(len(data))
			x := byte(1 + rng.IntN(255))
			data[off] ^= x
			flips = append(flips, fmt.Sprintf("%d^%02x", off, x))
		}
		if err := os.WriteFile(victim, data, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := fixtures.Reseal(snap); err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("iteration %d: %s flipped at %v", it, filepath.Base(victim), flips)

		// The oracle: can every entry be read, and are they the same?
		got, readErr := tryEntryDigest(snap)
		isDamaged := readErr != nil
		if !isDamaged && got != baseEntries {
			t.Fatalf("%s: the reader returned different entries without an error", where)
		}
		if isDamaged {
			damaged++
		} else {
			benign++
		}

		out := filepath.Join(root, "out")
		for _, c := range []struct {
			name string
			args []string
			// reads: the command reads every entry, so damage must fail it.
			reads bool
			// target: paths the command writes, absent after a failure.
			target []string
			ok     func(out string) bool // exit 0: is the output right?
		}{
			{name: "inspect", args: []string{"inspect", snap}},
			// verify reads the data too: deep is automatic for a small
			// snapshot.
			{name: "verify", args: []string{"verify", snap}, reads: true},
			{name: "verify --deep", args: []string{"verify", snap, "--deep"}, reads: true},
			{name: "verify --against", args: []string{"verify", snap, "--against", base}, reads: true},
			{name: "rewrite", args: []string{"rewrite", snap, "--buckets", "3", "--out", out}, reads: true, target: []string{out},
				ok: func(string) bool { code, _ := run(t, "verify", out, "--against", base, "--quiet"); return code == 0 }},
			{name: "split", args: []string{"split", snap, "--out", out + "-a", "--out", out + "-b", "--by", "buckets=0-3"}, reads: true, target: []string{out + "-a", out + "-b"},
				ok: func(string) bool {
					a, b := entryDigest(t, out+"-a"), entryDigest(t, out+"-b")
					return a != "" && b != "" // both read back whole; counts checked by split itself
				}},
			{name: "export", args: []string{"export", snap, "--format", "jsonl", "--out", out + ".jsonl"}, reads: true, target: []string{out + ".jsonl"},
				ok: func(string) bool { b, _ := os.ReadFile(out + ".jsonl"); return string(b) == want["export"] }},
			{name: "locate", args: []string{"locate", snap, key, "--json"},
				ok: func(o string) bool { return o == want["locate"] }},
			{name: "load", args: []string{"load", snap, "--width", "3", "--into", out}, reads: true, target: []string{out},
				ok: func(string) bool { return loadDigestOf(t, out) == want["load"] }},
		} {
			runs++
			code, o := run(t, append(c.args, "--quiet")...)
			if exits[c.name] == nil {
				exits[c.name] = map[int]int{}
			}
			exits[c.name][code]++
			if strings.Contains(o, "goroutine ") || strings.Contains(o, "panic") {
				t.Fatalf("%s: %s crashed:\n%s", where, c.name, o)
			}
			switch {
			case code == 0 && c.reads && isDamaged:
				t.Errorf("%s: %s exit 0 on a damaged table\n%s", where, c.name, o)
			case code == 0 && c.ok != nil && !c.ok(o):
				t.Errorf("%s: %s exit 0 with output other than the undamaged snapshot's\n%s", where, c.name, o)
			case code == 1 && strings.HasPrefix(c.name, "verify"):
				// a finding: verify's documented answer to damage
			case code == 2:
				if !strings.Contains(o, "data/") {
					t.Errorf("%s: %s exit 2 without naming the file:\n%s", where, c.name, o)
				}
			case code != 0:
				t.Errorf("%s: %s exit %d, want 0 or 2\n%s", where, c.name, code, o)
			}
			if code != 0 {
				for _, p := range c.target {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s: %s failed yet left %s", where, c.name, p)
					}
				}
			}
			// Nothing temporary is left, nor the lock file, whatever the
			// outcome.
			for _, name := range listDir(t, root) {
				if strings.Contains(name, ".rebucket-tmp-") || strings.HasPrefix(name, ".rebucket-spill-") || strings.HasSuffix(name, ".rebucket.lock") {
					t.Errorf("%s: %s (exit %d) left %s", where, c.name, code, name)
				}
			}
			for _, p := range []string{out, out + "-a", out + "-b", out + ".jsonl"} {
				os.RemoveAll(p)
			}
		}
		if t.Failed() {
			return
		}
		os.RemoveAll(snap)
	}
	t.Logf("%d iterations (%d damaged, %d benign), %d command runs in %v; exit codes by command: %v",
		iters, damaged, benign, runs, time.Since(start).Round(time.Second), exits)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := runCopy(src, dst); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
}

// mustReadRun runs the command and returns the file it wrote.
func mustReadRun(t *testing.T, file string, args ...string) []byte {
	t.Helper()
	mustRun(t, args...)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(file)
	return b
}

// tryEntryDigest reads every entry and per-worker file of a snapshot in
// process and hashes them; an error says the damage is visible.
func tryEntryDigest(dir string) (string, error) {
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	it := s.NewIterAll(context.Background())
	for it.Next() {
		fmt.Fprintf(h, "%x=%x\n", it.Key(), it.Value())
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func entryDigest(t *testing.T, dir string) string {
	t.Helper()
	d, err := tryEntryDigest(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return d
}

// loadDigest loads snap at width 3 into dir and digests the stores.
func loadDigest(t *testing.T, dir, snap string) string {
	t.Helper()
	mustRun(t, "load", snap, "--width", "3", "--into", dir, "--quiet")
	d := loadDigestOf(t, dir)
	os.RemoveAll(dir)
	return d
}

// loadDigestOf hashes every worker's store entries and state files.
func loadDigestOf(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	for i := range 3 {
		wd := filepath.Join(dir, fmt.Sprintf("worker-%04d", i))
		db, err := reader.OpenStore(wd)
		if err != nil {
			t.Fatalf("open store %s: %v", wd, err)
		}
		iter, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := iter.First(); ok; ok = iter.Next() {
			fmt.Fprintf(h, "%d %x=%x\n", i, iter.Key(), iter.Value())
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		states, _ := filepath.Glob(filepath.Join(wd, reader.StateDir, "*"))
		slices.Sort(states)
		for _, p := range states {
			b, _ := os.ReadFile(p)
			fmt.Fprintf(h, "%d %s %x\n", i, filepath.Base(p), sha256.Sum256(b))
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestTableDamagesEveryCommand runs every reading command over tables that
// Pebble reads without complaint and whose resealed manifest agrees with
// them, yet hold what FORMAT.md says a snapshot never holds: each command
// refuses them (verify with a finding, exit 1; the others exit 2 naming
// the file) and publishes nothing.
func TestTableDamagesEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	say := map[fixtures.Damage]string{
		fixtures.TombstoneEntry: "only sets",
		fixtures.RangeDeletion:  "range-deletion",
		fixtures.RangeKey:       "range-key",
		fixtures.UndecodableKey: "key",
	}
	for _, d := range fixtures.TableDamages {
		t.Run(string(d), func(t *testing.T) {
			root := t.TempDir()
			snap := filepath.Join(root, "snap")
			if _, err := fixtures.Generate(context.Background(), snap, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
				t.Fatal(err)
			}
			if err := fixtures.ApplyTable(context.Background(), snap, d); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(root, "out")
			for _, c := range []struct {
				args []string
				code int
			}{
				{[]string{"verify", snap, "--deep"}, 1},
				{[]string{"rewrite", snap, "--buckets", "3", "--out", out}, 2},
				{[]string{"split", snap, "--out", out, "--out", out + "-b", "--by", "buckets=0-3"}, 2},
				{[]string{"export", snap, "--out", out}, 2},
				{[]string{"load", snap, "--width", "1", "--into", out}, 2},
				{[]string{"load", snap, "--width", "3", "--into", out}, 2},
			} {
				code, o := run(t, append(c.args, "--quiet")...)
				if code != c.code || !strings.Contains(o, "data/") || !strings.Contains(o, say[d]) {
					t.Errorf("%s: exit %d, want %d naming the file and saying %q\n%s", strings.Join(c.args[:1], " "), code, c.code, say[d], o)
				}
				for _, p := range []string{out, out + "-b"} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s published %s", c.args[0], p)
					}
				}
			}
		})
	}
}
