package crashtest

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rebucket/rebucket/fixtures"
)

// flinkFixture is a generated canonical Flink savepoint, its tree hash and
// a reference export of it.
type flinkFixture struct {
	src, small      string // the rewrite's source, the export's
	hash, smallHash string
	export          []byte // the undisturbed Parquet export of small
}

func newFlinkFixture(t *testing.T) *flinkFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &flinkFixture{src: filepath.Join(dir, "src")}
	// 50k keys per keyed operator (250k entries, 6.5 MiB): a rewrite takes
	// a few hundred milliseconds, long enough to be killed at any phase.
	mustRun(t, "generate", "--engine", "flink", "--keys", "50000", "--out", fx.src, "--quiet")
	// Export is slower per entry (Parquet encoding): 10k keys keep its
	// run near the rewrite's.
	fx.small = filepath.Join(dir, "small")
	mustRun(t, "generate", "--engine", "flink", "--keys", "10000", "--out", fx.small, "--quiet")
	ref := filepath.Join(dir, "ref.parquet")
	fx.export = mustReadRun(t, ref, "export", fx.small, "--out", ref, "--quiet")
	fx.hash = flinkTreeHash(t, fx.src)
	fx.smallHash = flinkTreeHash(t, fx.small)
	return fx
}

func flinkTreeHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := fixtures.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// flinkCommand is one Flink writer under test.
type flinkCommand struct {
	name   string
	target string
	// args writes target; the trial directory (target's parent) doubles
	// as --tmp where a command takes one, so spill leftovers show there.
	args  func(fx *flinkFixture, target string) []string
	check func(t *testing.T, fx *flinkFixture, target string)
	// force: the command replaces a complete target with --force (export);
	// without it a complete target is removed by hand before the rerun.
	force bool
}

func checkFlinkRewrite(t *testing.T, fx *flinkFixture, target string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(target, "_metadata")); err != nil {
		t.Fatalf("target %s exists without its _metadata (the completion marker): %v", target, err)
	}
	mustRun(t, "verify", target, "--against", fx.src, "--quiet")
}

func checkFlinkExport(t *testing.T, fx *flinkFixture, target string) {
	t.Helper()
	b, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, fx.export) {
		t.Fatalf("export %s (%d bytes) differs from the undisturbed export (%d bytes)", target, len(b), len(fx.export))
	}
}

var flinkCommands = []flinkCommand{
	{
		name: "rewrite", target: "out",
		args: func(fx *flinkFixture, target string) []string {
			return []string{"rewrite", fx.src, "--buckets", "128", "--out", target, "--quiet"}
		},
		check: checkFlinkRewrite,
	},
	{
		// A small budget makes it spill (13 runs), into --tmp.
		name: "rewrite-spill", target: "out",
		args: func(fx *flinkFixture, target string) []string {
			return []string{"rewrite", fx.src, "--buckets", "128", "--out", target, "--memory", "2MiB", "--tmp", filepath.Dir(target), "--quiet"}
		},
		check: checkFlinkRewrite,
	},
	{
		name: "export", target: "out.parquet", force: true,
		args: func(fx *flinkFixture, target string) []string {
			return []string{"export", fx.small, "--out", target, "--quiet"}
		},
		check: checkFlinkExport,
	},
}

// flinkTemporary says whether a name may be left in the trial directory by
// a killed Flink writer: its temporary directories and spill entries.
func flinkTemporary(name string) bool {
	return strings.HasPrefix(name, ".rebucket-flink-") || strings.HasPrefix(name, ".out.parquet.rebucket-tmp-")
}

// TestCrashKillPointsFlink kills the Flink writers (rewrite of a generated
// savepoint, in memory and spilling, and export) with SIGKILL until each
// has been killed mid-run at killPoints() moments, spread over the run as
// TestCrashKillPoints does, and checks each kill: the source savepoint
// byte-identical, the target absent or complete (a _metadata only in a
// target that verify --against the source proves equal; an export equal
// to the undisturbed one), only temporary leftovers, and a rerun to the
// same target that succeeds and removes the dead run's leftovers.
func TestCrashKillPointsFlink(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	fx := newFlinkFixture(t)
	want := killPoints()
	for _, c := range flinkCommands {
		t.Run(c.name, func(t *testing.T) {
			var durs []time.Duration
			for range 3 {
				base := t.TempDir()
				start := time.Now()
				mustRun(t, c.args(fx, filepath.Join(base, c.target))...)
				durs = append(durs, time.Since(start))
				c.check(t, fx, filepath.Join(base, c.target))
			}
			dur := slices.Min(durs)
			var o outcome
			phi := (math.Sqrt(5) - 1) / 2
			k := 0
			for ; o.killed < want; k++ {
				if k >= 3*want {
					t.Fatalf("%d trials killed only %d runs mid-run (the others finished first); want %d", k, o.killed, want)
				}
				f := 1.25 * math.Mod(0.5+float64(k)*phi, 1)
				flinkTrial(t, fx, c, k, time.Duration(f*float64(dur)), &o)
				if t.Failed() {
					return
				}
			}
			t.Logf("flink %s: %d trials over a %v run: %d killed mid-run, %d finished first; target complete %d, absent %d; trials with temporary leftovers %d",
				c.name, k, dur.Round(time.Millisecond), o.killed, o.finished, o.targetComplete, o.targetAbsent, o.leftovers)
		})
	}
}

func flinkTrial(t *testing.T, fx *flinkFixture, c flinkCommand, k int, at time.Duration, o *outcome) {
	t.Helper()
	dir := t.TempDir()
	target := filepath.Join(dir, c.target)
	runKilled(t, c.args(fx, target), at, fmt.Sprintf("trial %d (%s, kill at %v)", k, c.name, at), o)
	where := fmt.Sprintf("trial %d (flink %s, kill at %v)", k, c.name, at)

	if flinkTreeHash(t, fx.src) != fx.hash || flinkTreeHash(t, fx.small) != fx.smallHash {
		t.Fatalf("%s: a source savepoint changed", where)
	}
	exists := false
	if _, err := os.Lstat(target); err == nil {
		exists = true
		o.targetComplete++
		c.check(t, fx, target)
	} else {
		o.targetAbsent++
	}
	// A temporary directory holding a _metadata could be taken for a
	// savepoint: one may exist only if it is complete (a run killed
	// between writing _metadata, last, and renaming its staged directory
	// to the target; verify --against must prove it equal).
	var left []string
	for _, name := range listDir(t, dir) {
		if name == c.target {
			continue
		}
		if !flinkTemporary(name) {
			t.Errorf("%s: unexpected leftover %s", where, name)
		}
		_ = filepath.WalkDir(filepath.Join(dir, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "_metadata" {
				if code, vout := run(t, "verify", filepath.Dir(p), "--against", fx.src, "--quiet"); code != 0 {
					t.Errorf("%s: leftover %s holds a _metadata of a savepoint that is not complete: verify exit %d\n%s", where, p, code, vout)
				}
			}
			return nil
		})
		left = append(left, name)
	}
	if len(left) > 0 {
		o.leftovers++
	}

	// Rerun: over a complete target it is refused (exit 3); export
	// replaces it with --force, a rewrite target is removed first (a
	// Flink rewrite takes no --force). Either way the rerun succeeds and
	// leaves only its target.
	if exists {
		if code, rout := run(t, c.args(fx, target)...); code != 3 {
			t.Errorf("%s: rerun over a complete target: exit %d, want 3 (refused)\n%s", where, code, rout)
		}
		if c.force {
			if code, rout := run(t, append(c.args(fx, target), "--force")...); code != 0 {
				t.Errorf("%s: rerun with --force: exit %d\n%s", where, code, rout)
			}
		} else {
			os.RemoveAll(target)
		}
	}
	if !exists || !c.force {
		if code, rout := run(t, c.args(fx, target)...); code != 0 {
			t.Errorf("%s: rerun: exit %d\n%s", where, code, rout)
		}
	}
	c.check(t, fx, target)
	for _, name := range listDir(t, dir) {
		if name != c.target {
			t.Errorf("%s: after the rerun, %s is still there (left by the killed run: %v); it holds %v", where, name, left, contents(filepath.Join(dir, name)))
		}
	}
}
