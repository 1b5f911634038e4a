package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rebucket/rebucket/engine/flink"
)

// flinkDamageSavepoints are the real canonical Flink 2.3.0 savepoints the
// fuzzer damages (keyed state in files, Snappy-compressed, RocksDB's
// canonical form, and all inline in _metadata).
var flinkDamageSavepoints = []string{"heap-files", "heap-files-snappy", "rocksdb-files", "heap-inline"}

// durations in human output ("(306.628µs)", "in 1ms") differ run to run.
var durationRE = regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ns|µs|ms|s|m[0-9.]*s|h[0-9.m]*s)\b`)

func normalize(s string) string { return durationRE.ReplaceAllString(s, "DUR") }

// runTimed runs the binary with a deadline: a run past it is a hang.
func runTimed(t *testing.T, limit time.Duration, args ...string) (code int, out string, hung bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, b.String(), true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, b.String() + "\nkilled by " + ws.Signal().String(), false
		}
		return ee.ExitCode(), b.String(), false
	}
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return 0, b.String(), false
}

// TestDamagedSavepointFuzz flips 1 to 3 bytes in a keyed-state file or in
// _metadata of a copy of a real savepoint and runs every reading command
// on it through the binary: inspect, verify, verify --against the
// original, rewrite, export and locate. None may panic or hang; each exits
// 0, 2 (damaged input) or, for verify, 1 (findings); a failed run leaves
// no target and nothing temporary.
//
// Flink's format has no checksums, so a flip may leave a savepoint that
// decodes and differs (a value, a timer). An in-process oracle,
// flink.Equal against the original, sorts each damaged copy:
//   - it fails to read: every command that reads all keyed state
//     (verify, verify --against, rewrite, export) must fail;
//   - it reads as equal (the flip hit a part no comparison uses): a
//     command that exits 0 prints what it prints for the original (export:
//     the same file);
//   - it reads but differs: verify --against the original must not exit 0;
//   - it reads as equal but its _metadata decodes to other content (a
//     checkpoint id, a name: fields no comparison covers): exit 0 with any
//     output is right.
//
// A rewrite that exits 0 must have published a target that verify
// --against the damaged source accepts.
//
// REBUCKET_FUZZ_ITERS sets the iterations (default 150, about 20 s) and
// REBUCKET_FUZZ_SEED the seed.
func TestDamagedSavepointFuzz(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	iters := 150
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
	testdata, err := filepath.Abs(filepath.Join("..", "..", "engine", "flink", "testdata", "real"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	sp := filepath.Join(root, "sp") // every copy at one path, so outputs compare
	out := filepath.Join(root, "out")
	const limit = 60 * time.Second

	type command struct {
		name   string
		args   []string
		reads  bool   // reads every keyed entry: must fail on unreadable damage
		target string // written by the command; absent after a failure
	}
	commandsFor := func(orig string) []command {
		return []command{
			{name: "inspect", args: []string{"inspect", sp}},
			{name: "verify", args: []string{"verify", sp}, reads: true},
			{name: "verify --against", args: []string{"verify", sp, "--against", orig}, reads: true},
			{name: "rewrite", args: []string{"rewrite", sp, "--buckets", "16", "--out", out}, reads: true, target: out},
			{name: "export", args: []string{"export", sp, "--out", out + ".jsonl"}, reads: true, target: out + ".jsonl"},
			{name: "locate str", args: []string{"locate", sp, "k5"}},
			{name: "locate long", args: []string{"locate", sp, "7"}},
		}
	}

	// The undamaged outputs, per savepoint.
	type baseline struct{ out, export map[string]string }
	base := map[string]baseline{}
	for _, name := range flinkDamageSavepoints {
		orig := filepath.Join(testdata, name)
		copyTree(t, orig, sp)
		b := baseline{out: map[string]string{}, export: map[string]string{}}
		for _, c := range commandsFor(orig) {
			code, o, hung := runTimed(t, limit, c.args...)
			if code != 0 || hung {
				t.Fatalf("%s on the undamaged %s: exit %d\n%s", c.name, name, code, o)
			}
			b.out[c.name] = normalize(o)
			if c.name == "export" {
				e, _ := os.ReadFile(out + ".jsonl")
				b.export[name] = string(e)
			}
			os.RemoveAll(out)
			os.Remove(out + ".jsonl")
		}
		base[name] = b
		os.RemoveAll(sp)
	}

	rng := rand.New(rand.NewPCG(fseed, 0xf11c))
	start := time.Now()
	classes := map[string]int{}
	exits := map[string]map[int]int{}
	runs := 0
	for it := range iters {
		name := flinkDamageSavepoints[rng.IntN(len(flinkDamageSavepoints))]
		orig := filepath.Join(testdata, name)
		copyTree(t, orig, sp)
		files, _ := filepath.Glob(filepath.Join(sp, "*"))
		slices.Sort(files)
		victim := filepath.Join(sp, "_metadata")
		if keyed := slices.DeleteFunc(files, func(p string) bool { return filepath.Base(p) == "_metadata" }); len(keyed) > 0 && rng.IntN(3) > 0 {
			victim = keyed[rng.IntN(len(keyed))]
		}
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
		if err := os.WriteFile(victim, data, 0o644); err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("iteration %d: %s/%s flipped at %v", it, name, filepath.Base(victim), flips)

		eq, oerr := flink.Equal(context.Background(), orig, sp, flink.ScanOptions{Parallelism: 1})
		class := "unreadable"
		switch {
		case oerr == nil && eq.Equal && sameMetadata(t, orig, sp):
			class = "equal"
		case oerr == nil && eq.Equal:
			// A field no comparison covers (the checkpoint id, a name)
			// now holds another valid value: outputs may differ.
			class = "metadata-different"
		case oerr == nil:
			class = "different"
		}
		classes[class]++

		for _, c := range commandsFor(orig) {
			runs++
			code, o, hung := runTimed(t, limit, append(c.args, "--quiet")...)
			if exits[c.name] == nil {
				exits[c.name] = map[int]int{}
			}
			exits[c.name][code]++
			if hung {
				t.Fatalf("%s: %s hung (over %v)\n%s", where, c.name, limit, o)
			}
			if strings.Contains(o, "goroutine ") || strings.Contains(o, "panic") || code < 0 {
				t.Fatalf("%s: %s crashed:\n%s", where, c.name, o)
			}
			isVerify := strings.HasPrefix(c.name, "verify")
			switch {
			case code == 0:
				if c.reads && class == "unreadable" {
					t.Errorf("%s: %s exit 0 on a savepoint that does not read (%v)\n%s", where, c.name, oerr, o)
				}
				if c.name == "verify --against" && class == "different" {
					t.Errorf("%s: verify --against the original exit 0, yet the savepoint differs\n%s", where, o)
				}
				if class == "equal" {
					if c.name == "export" {
						if e, _ := os.ReadFile(out + ".jsonl"); string(e) != base[name].export[name] {
							t.Errorf("%s: export exit 0 with a file other than the undamaged savepoint's", where)
						}
					} else if c.name != "rewrite" && normalize(o) != base[name].out[c.name] {
						t.Errorf("%s: %s exit 0 with output other than the undamaged savepoint's:\n%s\nwant:\n%s", where, c.name, o, base[name].out[c.name])
					}
				}
				if c.name == "rewrite" {
					if vc, vo := run(t, "verify", out, "--against", sp, "--quiet"); vc != 0 {
						t.Errorf("%s: rewrite exit 0 published a target that verify --against the damaged source rejects: exit %d\n%s", where, vc, vo)
					}
				}
			case code == 1 && isVerify:
				// a finding: verify's answer to damage
			case code == 2:
				if strings.TrimSpace(o) == "" {
					t.Errorf("%s: %s exit 2 without a word", where, c.name)
				}
			default:
				t.Errorf("%s: %s exit %d, want 0 or 2 (verify: 1)\n%s", where, c.name, code, o)
			}
			if code != 0 && c.target != "" {
				if _, err := os.Lstat(c.target); err == nil {
					t.Errorf("%s: %s failed yet left %s", where, c.name, c.target)
				}
			}
			for _, n := range listDir(t, root) {
				if n != "sp" && n != filepath.Base(c.target) {
					t.Errorf("%s: %s (exit %d) left %s", where, c.name, code, n)
				}
			}
			os.RemoveAll(out)
			os.Remove(out + ".jsonl")
		}
		if t.Failed() {
			return
		}
		os.RemoveAll(sp)
	}
	t.Logf("%d iterations (%v), %d command runs in %v; exit codes by command: %v",
		iters, classes, runs, time.Since(start).Round(time.Second), exits)
}

// sameMetadata: the damaged _metadata decodes to what the original's
// does (the flips hit bytes the decoder ignores, or none).
func sameMetadata(t *testing.T, orig, damaged string) bool {
	t.Helper()
	a, err := os.ReadFile(filepath.Join(orig, "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(damaged, "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		return true
	}
	ma, err := flink.DecodeMetadata(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := flink.DecodeMetadata(b)
	if err != nil {
		return false
	}
	ea, err1 := ma.Encode()
	eb, err2 := mb.Encode()
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}
