package crashtest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sparkSource is one Spark checkpoint the kill trials rewrite.
type sparkSource struct {
	name    string
	dir     string
	buckets string // the new partition count (the source's differs)
	kills   int    // default kills mid-run (REBUCKET_CRASH_POINTS overrides)
}

// sparkInterop is the directory of the real pyspark checkpoints.
func sparkInterop(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "engine", "spark", "testdata", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sparkKills is how many runs of one source to kill mid-run:
// REBUCKET_CRASH_POINTS for every source, else the source's default (few
// for the small real checkpoints, whose run is mostly start-up, more for
// the generated one, where kills land while partitions are written).
func sparkKills(def int) int {
	if s := os.Getenv("REBUCKET_CRASH_POINTS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// sparkTemporary says whether a name may be left beside the target by a
// killed Spark rewrite: its staging run directory (engine/spark
// TempPrefix), which the next rewrite into the same parent removes
// (fsx.RemoveStale, once the dead run's lock is free).
func sparkTemporary(name string) bool {
	return strings.HasPrefix(name, ".rebucket-spark-")
}

// TestCrashKillPointsSpark kills `rewrite` of Spark checkpoints with
// SIGKILL at golden-ratio moments over the run (as TestCrashKillPoints
// does) until each source has been killed mid-run sparkKills times: real
// HDFS-backed checkpoints (a string-keyed aggregation, a stream-stream
// join), real RocksDB ones (zips and SSTs; changelog checkpointing;
// transformWithState) and a generated HDFS-backed one of 200,000 keys.
// After each kill: the source tree hashed identical; the target absent,
// or complete (verify --against the source exits 0, verify has no
// finding); only .rebucket-spark-* leftovers beside it; and a rerun into
// the same target succeeds and removes them.
func TestCrashKillPointsSpark(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	interop := sparkInterop(t)
	gen := filepath.Join(t.TempDir(), "gen")
	mustRun(t, "generate", "--engine", "spark", "--keys", "200000", "--out", gen, "--quiet")
	sources := []sparkSource{
		{"hdfs-agg_string", filepath.Join(interop, "agg_string", "checkpoint"), "5", 3},
		{"hdfs-join", filepath.Join(interop, "join", "checkpoint"), "3", 3},
		{"rocksdb", filepath.Join(interop, "rocksdb", "checkpoint"), "5", 3},
		{"rocksdb-changelog", filepath.Join(interop, "agg_string_rocksdb_changelog", "checkpoint"), "3", 3},
		{"rocksdb-tws", filepath.Join(interop, "tws", "checkpoint"), "5", 3},
		{"hdfs-generated-200k", gen, "16", 8},
	}
	total := outcome{}
	for _, s := range sources {
		t.Run(s.name, func(t *testing.T) {
			hash := tree(t, s.dir)
			args := func(target string) []string {
				return []string{"rewrite", s.dir, "--buckets", s.buckets, "--out", target, "--quiet"}
			}
			var durs []time.Duration
			for range 3 {
				target := filepath.Join(t.TempDir(), "out")
				start := time.Now()
				mustRun(t, args(target)...)
				durs = append(durs, time.Since(start))
				checkSparkRewrite(t, s.dir, target, "undisturbed run")
			}
			dur := slices.Min(durs)
			want := sparkKills(s.kills)
			var o outcome
			phi := (math.Sqrt(5) - 1) / 2
			k := 0
			for ; o.killed < want; k++ {
				if k >= 4*want+4 {
					t.Fatalf("%d trials killed only %d runs mid-run (the others finished first); want %d", k, o.killed, want)
				}
				f := 1.25 * math.Mod(0.5+float64(k)*phi, 1)
				sparkTrial(t, s, hash, args, k, time.Duration(f*float64(dur)), &o)
				if t.Failed() {
					return
				}
			}
			t.Logf("spark rewrite %s: %d trials over a %v run: %d killed mid-run, %d finished first; target complete %d, absent %d; trials with temporary leftovers %d",
				s.name, k, dur.Round(time.Millisecond), o.killed, o.finished, o.targetComplete, o.targetAbsent, o.leftovers)
			total.killed += o.killed
			total.finished += o.finished
			total.targetComplete += o.targetComplete
			total.targetAbsent += o.targetAbsent
			total.leftovers += o.leftovers
		})
	}
	t.Logf("spark rewrite, all sources: %d killed mid-run, %d finished first; target complete %d, absent %d; trials with leftovers %d",
		total.killed, total.finished, total.targetComplete, total.targetAbsent, total.leftovers)
}

// checkSparkRewrite: a target that exists is the source re-partitioned,
// proved by verify --against (equal rows per operator and store), and
// verify on its own finds nothing.
func checkSparkRewrite(t *testing.T, src, target, where string) {
	t.Helper()
	if code, out := run(t, "verify", target, "--against", src, "--quiet"); code != 0 {
		t.Fatalf("%s: target %s: verify --against the source exit %d\n%s", where, target, code, out)
	}
	if code, out := run(t, "verify", target, "--quiet"); code != 0 {
		t.Fatalf("%s: target %s: verify exit %d (findings)\n%s", where, target, code, out)
	}
}

func sparkTrial(t *testing.T, s sparkSource, hash map[string]string, args func(string) []string, k int, at time.Duration, o *outcome) {
	t.Helper()
	dir := t.TempDir()
	target := filepath.Join(dir, "out")
	where := fmt.Sprintf("trial %d (spark rewrite %s, kill at %v)", k, s.name, at)
	runKilled(t, args(target), at, where, o)

	sameTree(t, where+": source", hash, tree(t, s.dir))
	if _, err := os.Lstat(target); err == nil {
		o.targetComplete++
		checkSparkRewrite(t, s.dir, target, where)
		// A second rewrite into a complete target is refused; the test
		// then removes it by hand (a Spark rewrite takes no --force).
		if code, out := run(t, args(target)...); code != 3 {
			t.Errorf("%s: rerun over a complete target: exit %d, want 3 (refused)\n%s", where, code, out)
		}
		if err := os.RemoveAll(target); err != nil {
			t.Fatal(err)
		}
	} else {
		o.targetAbsent++
	}
	var left []string
	for _, name := range listDir(t, dir) {
		if name == "out" {
			continue
		}
		if !sparkTemporary(name) {
			t.Errorf("%s: unexpected leftover %s (holds %v)", where, name, contents(filepath.Join(dir, name)))
		}
		left = append(left, name)
	}
	if len(left) > 0 {
		o.leftovers++
	}

	// The rerun into the same target succeeds, and removes what the
	// killed run left (the dead run's staging directory).
	if code, out := run(t, args(target)...); code != 0 {
		t.Fatalf("%s: rerun: exit %d\n%s", where, code, out)
	}
	checkSparkRewrite(t, s.dir, target, where+": rerun")
	sameTree(t, where+": source after the rerun", hash, tree(t, s.dir))
	for _, name := range listDir(t, dir) {
		if name != "out" {
			t.Errorf("%s: after the rerun, %s is still there (left by the killed run: %v); it holds %v", where, name, left, contents(filepath.Join(dir, name)))
		}
	}
}
