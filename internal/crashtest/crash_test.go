// Package crashtest kills the rebucket binary with SIGKILL at random
// moments of rewrite, import, export and load, and checks what a crash may
// leave behind: the source byte-identical, the target absent or complete,
// leftovers only temporary directories that the next run removes, and a
// rerun that succeeds and verifies.
//
// The default run does a few trials per command; REBUCKET_CRASH_TRIALS=N
// runs N per command (the issue asks for at least 30), and
// REBUCKET_CRASH_SEED picks the kill moments.
package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rebucket/rebucket/internal/extsort"
	"github.com/rebucket/rebucket/reader"
)

var bin string // the binary under test

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebucket-crashtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "rebucket")
	if b := os.Getenv("REBUCKET_BIN"); b != "" {
		bin = b
	} else {
		out, err := exec.Command("go", "build", "-o", bin, "github.com/rebucket/rebucket/cmd/rebucket").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build rebucket: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func trials() int {
	if s := os.Getenv("REBUCKET_CRASH_TRIALS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 3
}

func seed() uint64 {
	if s := os.Getenv("REBUCKET_CRASH_SEED"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n
		}
	}
	return 1
}

// run runs the binary to completion and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return 0, out.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out := run(t, args...)
	if code != 0 {
		t.Fatalf("rebucket %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// tree hashes every file and records every directory under root.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = "dir " + info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = info.Mode().String() + " " + hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for p, h := range want {
		if got[p] != h {
			t.Errorf("%s: %s changed: %q -> %q", what, p, h, got[p])
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s appeared", what, p)
		}
	}
}

// fixture is the shared input: a source snapshot and its Parquet export.
type fixture struct {
	src     string
	dataset string
	entries uint64
	hashes  map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{src: filepath.Join(dir, "src"), dataset: filepath.Join(dir, "in.parquet")}
	mustRun(t, "generate", "--out", fx.src, "--buckets", "8", "--width", "4", "--entries", "60000",
		"--spread", "--file-size", "256KiB", "--quiet")
	mustRun(t, "export", fx.src, "--out", fx.dataset, "--quiet")
	s, err := reader.Open(fx.src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fx.entries = s.Manifest().TotalEntries()
	fx.hashes = tree(t, filepath.Dir(fx.src))
	return fx
}

// command is one command under test: how to run it into a target and how
// to check a target that exists.
type command struct {
	name string
	// args runs the command from fx writing target.
	args func(fx *fixture, target string) []string
	// check asserts that an existing target is complete and correct.
	check func(t *testing.T, fx *fixture, target string)
	// target is the path name in the trial directory.
	target string
}

func checkSnapshot(t *testing.T, fx *fixture, target string) {
	t.Helper()
	mustRun(t, "verify", target, "--deep", "--quiet")
	mustRun(t, "verify", target, "--against", fx.src, "--quiet")
}

func checkExport(t *testing.T, fx *fixture, target string) {
	t.Helper()
	// Every row reads back: import it and prove the result equal to the
	// source (a row missing, duplicated or changed is a finding).
	back := filepath.Join(t.TempDir(), "back")
	mustRun(t, "import", target, "--buckets", "8", "--out", back, "--quiet")
	mustRun(t, "verify", back, "--against", fx.src, "--quiet")
}

func checkLoad(t *testing.T, fx *fixture, target string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(target, "LOAD.json"))
	if err != nil {
		t.Fatalf("load directory %s exists without its record: %v", target, err)
	}
	var rec struct {
		Verified bool `json:"verified"`
		Complete bool `json:"complete"`
	}
	if err := json.Unmarshal(data, &rec); err != nil || !rec.Verified || !rec.Complete {
		t.Fatalf("LOAD.json: %v %+v", err, rec)
	}
	s, err := reader.Open(fx.src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.NewLoader(3, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	// Check a copy: opening a Pebble store writes to it.
	cp := filepath.Join(t.TempDir(), "load")
	if out, err := exec.Command("cp", "-a", target, cp).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v %s", target, err, out)
	}
	var total uint64
	for i := range 3 {
		c, err := l.CheckStore(context.Background(), i, filepath.Join(cp, fmt.Sprintf("worker-%04d", i)))
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if c.Outside != 0 {
			t.Fatalf("worker %d holds %d entries outside its buckets", i, c.Outside)
		}
		total += c.Entries
	}
	if total != fx.entries {
		t.Fatalf("the stores hold %d entries, the snapshot %d", total, fx.entries)
	}
}

var commands = []command{
	{
		name:   "rewrite",
		target: "out",
		// 8 -> 12 under mod is a shuffle; a small budget makes it spill.
		args: func(fx *fixture, target string) []string {
			return []string{"rewrite", fx.src, "--buckets", "12", "--out", target, "--memory", "2MiB", "--file-size", "256KiB", "--quiet"}
		},
		check: checkSnapshot,
	},
	{
		name:   "import",
		target: "out",
		args: func(fx *fixture, target string) []string {
			return []string{"import", fx.dataset, "--buckets", "16", "--out", target, "--memory", "1MiB", "--file-size", "256KiB", "--quiet"}
		},
		check: checkSnapshot,
	},
	{
		name:   "export",
		target: "out.parquet",
		args: func(fx *fixture, target string) []string {
			return []string{"export", fx.src, "--out", target, "--quiet"}
		},
		check: checkExport,
	},
	{
		name:   "export-partitioned",
		target: "out",
		args: func(fx *fixture, target string) []string {
			return []string{"export", fx.src, "--out", target, "--partition-by", "bucket", "--quiet"}
		},
		check: checkExport,
	},
	{
		name:   "load",
		target: "out",
		args: func(fx *fixture, target string) []string {
			return []string{"load", fx.src, "--width", "3", "--into", target, "--quiet"}
		},
		check: checkLoad,
	},
}

// allowedLeftover reports whether a name in the trial directory, other
// than the target, may remain after a crash: the lock file (flock; its
// presence holds no lock), temporary entries of the target's own naming,
// and spill directories named after their process; the next run removes
// all but the lock file (the rerun check below proves it).
func allowedLeftover(target, name string) bool {
	stem := strings.TrimSuffix(target, filepath.Ext(target))
	return name == "."+target+".rebucket.lock" || strings.HasPrefix(name, "."+target+".rebucket-tmp-") ||
		// the export's per-worker sibling, out.workers.parquet
		strings.HasPrefix(name, "."+stem+".workers"+filepath.Ext(target)+".rebucket-tmp-") ||
		strings.HasPrefix(name, extsort.SpillPrefix)
}

// Outcome counts, for the report.
type outcome struct {
	killed, finished, targetComplete, targetAbsent, leftovers int
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	fx := newFixture(t)
	n := trials()
	rng := rand.New(rand.NewPCG(seed(), 0x5eed))
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			// Measure undisturbed runs (the fastest of three, as the
			// machine's load only slows a run down): the duration spreads
			// the kills over the whole run, publication included.
			var durs []time.Duration
			for range 3 {
				base := t.TempDir()
				start := time.Now()
				mustRun(t, c.args(fx, filepath.Join(base, c.target))...)
				durs = append(durs, time.Since(start))
				c.check(t, fx, filepath.Join(base, c.target))
			}
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			dur := durs[0]
			var o outcome
			for k := range n {
				// Two thirds uniform over the run, one third in its last
				// fifth, where files are finished and published.
				f := rng.Float64()
				if k%3 == 2 {
					f = 0.8 + 0.2*rng.Float64()
				}
				at := time.Duration(f * float64(dur))
				trial(t, fx, c, k, at, &o)
				if t.Failed() {
					return
				}
			}
			t.Logf("%s: %d trials over a %v run: %d killed, %d finished first; target complete %d, absent %d; trials with temporary leftovers %d",
				c.name, n, dur.Round(time.Millisecond), o.killed, o.finished, o.targetComplete, o.targetAbsent, o.leftovers)
		})
	}
}

// runKilled runs the binary with args and SIGKILLs it at at, counting a
// run that was killed and one that finished first; any other ending fails
// the test.
func runKilled(t *testing.T, args []string, at time.Duration, where string, o *outcome) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(at, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	var ee *exec.ExitError
	switch {
	case err == nil:
		o.finished++
	case errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		o.killed++
	default:
		t.Fatalf("%s: %v\n%s", where, err, out.String())
	}
}

func trial(t *testing.T, fx *fixture, c command, k int, at time.Duration, o *outcome) {
	t.Helper()
	dir := t.TempDir()
	target := filepath.Join(dir, c.target)
	runKilled(t, c.args(fx, target), at, fmt.Sprintf("trial %d (%s, kill at %v)", k, c.name, at), o)
	where := fmt.Sprintf("trial %d (%s, kill at %v)", k, c.name, at)

	// The source is untouched.
	sameTree(t, where+": source", fx.hashes, tree(t, filepath.Dir(fx.src)))

	// The target is absent or complete.
	exists := false
	if _, err := os.Lstat(target); err == nil {
		exists = true
		o.targetComplete++
		c.check(t, fx, target)
	} else {
		o.targetAbsent++
	}

	// Leftovers are only temporary entries of the target's naming.
	names := listDir(t, dir)
	var left []string
	for _, name := range names {
		if name == c.target || name == c.target[:len(c.target)-len(filepath.Ext(c.target))]+".workers.parquet" {
			continue
		}
		if !allowedLeftover(c.target, name) {
			t.Errorf("%s: unexpected leftover %s (all: %v)", where, name, names)
		}
		if !strings.HasSuffix(name, ".rebucket.lock") {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		o.leftovers++
	}

	// Rerunning the same command succeeds (or, over a complete target, is
	// refused as a target that exists) and leaves nothing temporary behind.
	code, rout := run(t, c.args(fx, target)...)
	switch {
	case exists && code != 3:
		t.Errorf("%s: rerun over a complete target: exit %d, want 3 (refused)\n%s", where, code, rout)
	case !exists && code != 0:
		t.Errorf("%s: rerun: exit %d\n%s", where, code, rout)
	}
	if !exists {
		c.check(t, fx, target)
	}
	if exists {
		// --force replaces it once the new one is complete.
		args := append(c.args(fx, target), "--force")
		if code, rout := run(t, args...); code != 0 {
			t.Errorf("%s: rerun with --force: exit %d\n%s", where, code, rout)
		}
		c.check(t, fx, target)
	}
	for _, name := range listDir(t, dir) {
		if name == c.target || strings.HasSuffix(name, ".rebucket.lock") || strings.HasSuffix(name, ".workers.parquet") {
			continue
		}
		t.Errorf("%s: after the rerun, %s is still there (left by the killed run: %v); it holds %v", where, name, left, contents(filepath.Join(dir, name)))
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// contents lists a leftover directory, for the failure message.
func contents(p string) []string {
	var out []string
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(p, q)
			out = append(out, rel)
		}
		return nil
	})
	return out
}
