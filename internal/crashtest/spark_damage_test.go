package crashtest

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rebucket/rebucket/engine/spark"
)

// sparkDamageCheckpoints are the real pyspark 4.3 checkpoints the fuzzer
// damages, with a key for locate: HDFS-backed (an aggregation, a
// stream-stream join, two operators) and RocksDB (zips of SSTs,
// changelog checkpointing, transformWithState with and without
// changelogs).
var sparkDamageCheckpoints = []struct{ name, locate string }{
	{"agg_string", "k=k95"},
	{"join", "field0=k95"},
	{"two_op", "k=k11"},
	{"rocksdb", "k=k0"},
	{"agg_string_rocksdb_changelog", "k=k0"},
	{"tws", "k=k0"},
	{"tws_rocksdb_changelog", "k=k0"},
}

// TestDamagedCheckpointFuzzSpark flips 1 to 3 bytes in one file of a copy
// of a real Spark checkpoint (a .delta, .snapshot, .changelog or .zip, an
// SST, the schema file, offsets, commits, the operator metadata, the
// checkpoint metadata) and runs inspect, verify, verify --against the
// original, rewrite, export (Parquet) and locate through the binary, each
// under a deadline. None may panic or hang; each exits with a documented
// code: 0, 2 (damaged or unsupported input), 1 for verify's findings and
// for a rewrite whose self-check finds a difference, 3 for a rewrite the
// damage made a no-op (the partition count now equal to --buckets); never
// 4 (damage is not a failure while working). A failed rewrite or export
// leaves no target and nothing temporary; a rewrite that exits 0 publishes
// a target that verify --against the damaged source accepts.
//
// The oracle is spark.Equal, in process, against the original: a copy
// that does not read must fail every command that reads all committed
// rows (verify, verify --against, rewrite, export); a copy that reads but
// differs must fail verify --against.
//
// State files are checksummed (lz4 blocks, SST blocks, zip CRCs) but the
// JSON logs and metadata are not: a flip there may still parse, and then
// any documented outcome is right as long as a published rewrite is
// consistent with its (damaged) source.
//
// REBUCKET_FUZZ_ITERS sets the iterations (default 40, about 25 s) and
// REBUCKET_FUZZ_SEED the seed.
func TestDamagedCheckpointFuzzSpark(t *testing.T) {
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
	interop := sparkInterop(t)
	root := t.TempDir()
	sp := filepath.Join(root, "sp") // every copy at one path, so outputs compare
	out := filepath.Join(root, "out")
	const limit = 60 * time.Second

	type command struct {
		name   string
		args   []string
		target string // written by the command; absent after a failure
		codes  []int  // exit codes other than 0 and 2 that are right
		reads  bool   // reads every committed row: must fail on unreadable damage
	}
	commandsFor := func(orig, key string) []command {
		return []command{
			{name: "inspect", args: []string{"inspect", sp}},
			{name: "verify", args: []string{"verify", sp}, codes: []int{1}, reads: true},
			{name: "verify --against", args: []string{"verify", sp, "--against", orig}, codes: []int{1}, reads: true},
			{name: "rewrite", args: []string{"rewrite", sp, "--buckets", "5", "--out", out}, target: out, codes: []int{1, 3}, reads: true},
			{name: "export", args: []string{"export", sp, "--out", out}, target: out, reads: true},
			{name: "locate", args: []string{"locate", sp, key}},
		}
	}

	// Every command succeeds on the undamaged copies (locate excepted
	// where it does not take the store: transformWithState).
	for _, c := range sparkDamageCheckpoints {
		orig := filepath.Join(interop, c.name, "checkpoint")
		copyTree(t, orig, sp)
		for _, cmd := range commandsFor(orig, c.locate) {
			code, o, hung := runTimed(t, limit, append(cmd.args, "--quiet")...)
			if hung || (code != 0 && !(cmd.name == "locate" && strings.HasPrefix(c.name, "tws"))) {
				t.Fatalf("%s on the undamaged %s: exit %d\n%s", cmd.name, c.name, code, o)
			}
			os.RemoveAll(out)
		}
		os.RemoveAll(sp)
	}

	rng := rand.New(rand.NewPCG(fseed, 0x5ba4c))
	start := time.Now()
	exits := map[string]map[int]int{}
	kinds := map[string]int{}
	classes := map[string]int{}
	runs := 0
	for it := range iters {
		c := sparkDamageCheckpoints[rng.IntN(len(sparkDamageCheckpoints))]
		orig := filepath.Join(interop, c.name, "checkpoint")
		copyTree(t, orig, sp)
		// Every file Spark reads; Hadoop's .crc side files (which
		// Spark does not check on read) are left out.
		var files []string
		_ = filepath.WalkDir(sp, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
				if info, err := d.Info(); err == nil && info.Size() > 0 {
					files = append(files, p)
				}
			}
			return nil
		})
		slices.Sort(files)
		victim := files[rng.IntN(len(files))]
		rel, _ := filepath.Rel(sp, victim)
		kind := sparkFileKind(rel)
		kinds[kind]++
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
		where := fmt.Sprintf("iteration %d: %s/%s flipped at %v", it, c.name, rel, flips)

		// The in-process oracle: spark.Equal against the original reads
		// every row of the committed version.
		eq, oerr := spark.Equal(context.Background(), orig, sp, spark.ScanOptions{Parallelism: 1})
		class := "unreadable"
		switch {
		case oerr == nil && eq.Equal:
			class = "equal"
		case oerr == nil:
			class = "different"
		}
		classes[class]++
		if class == "different" {
			t.Logf("%s: reads, differs: %v", where, eq.Differences)
		}

		for _, cmd := range commandsFor(orig, c.locate) {
			runs++
			code, o, hung := runTimed(t, limit, append(cmd.args, "--quiet")...)
			if exits[cmd.name] == nil {
				exits[cmd.name] = map[int]int{}
			}
			exits[cmd.name][code]++
			if hung {
				t.Fatalf("%s: %s hung (over %v)\n%s", where, cmd.name, limit, o)
			}
			if strings.Contains(o, "goroutine ") || strings.Contains(o, "panic:") || code < 0 {
				t.Fatalf("%s: %s crashed:\n%s", where, cmd.name, o)
			}
			switch {
			case code == 0:
				if cmd.reads && class == "unreadable" {
					t.Errorf("%s: %s exit 0 on a checkpoint that does not read (%v)\n%s", where, cmd.name, oerr, o)
				}
				if cmd.name == "verify --against" && class == "different" {
					t.Errorf("%s: verify --against the original exit 0, yet the checkpoint differs (%v)\n%s", where, eq.Differences, o)
				}
				if cmd.name == "rewrite" {
					if vc, vo := run(t, "verify", out, "--against", sp, "--quiet"); vc != 0 {
						t.Errorf("%s: rewrite exit 0 published a target that verify --against the damaged source rejects: exit %d\n%s", where, vc, vo)
					}
				}
			case code == 2 || slices.Contains(cmd.codes, code):
				if strings.TrimSpace(o) == "" {
					t.Errorf("%s: %s exit %d without a word", where, cmd.name, code)
				}
			default:
				t.Errorf("%s: %s exit %d, want 0, 2 or %v\n%s", where, cmd.name, code, cmd.codes, o)
			}
			if code != 0 && cmd.target != "" {
				if _, err := os.Lstat(cmd.target); err == nil {
					t.Errorf("%s: %s failed yet left %s", where, cmd.name, cmd.target)
				}
			}
			for _, n := range listDir(t, root) {
				if n != "sp" && n != filepath.Base(cmd.target) {
					t.Errorf("%s: %s (exit %d) left %s", where, cmd.name, code, n)
				}
			}
			os.RemoveAll(out)
		}
		if t.Failed() {
			return
		}
		os.RemoveAll(sp)
	}
	t.Logf("%d iterations (seed %d; damaged files by kind %v; %v), %d command runs in %v; exit codes by command: %v",
		iters, fseed, kinds, classes, runs, time.Since(start).Round(time.Second), exits)
}

// sparkFileKind names what a checkpoint file is, for the report.
func sparkFileKind(rel string) string {
	base := filepath.Base(rel)
	switch {
	case strings.HasPrefix(rel, "offsets/"):
		return "offsets"
	case strings.HasPrefix(rel, "commits/"):
		return "commits"
	case strings.HasPrefix(rel, "sources/"):
		return "sources"
	case rel == "metadata":
		return "metadata"
	case base == "schema" || strings.Contains(rel, "/_stateSchema/"):
		return "schema"
	case strings.Contains(rel, "/_metadata/"):
		return "operator-metadata"
	case strings.HasSuffix(base, ".sst"):
		return "sst"
	case strings.HasSuffix(base, ".zip"):
		return "zip"
	case strings.HasSuffix(base, ".delta"):
		return "delta"
	case strings.HasSuffix(base, ".snapshot"):
		return "snapshot"
	case strings.HasSuffix(base, ".changelog"):
		return "changelog"
	}
	return "other"
}
