package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// countStores opens every worker store under dir with Pebble and returns,
// per encoded key, how many stores hold it, checking each is its owner's.
func countStores(t *testing.T, dir string, width, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < width; i++ {
		db, err := reader.OpenStore(filepath.Join(dir, fmt.Sprintf("worker-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		it, _ := db.NewIter(nil)
		for ok := it.First(); ok; ok = it.Next() {
			b, _ := snapshotfmt.KeyBucket(it.Key())
			if o := snapshotfmt.OwnerOf(int(b), width, n); o != i {
				t.Errorf("worker %d of %d holds bucket %d, owned by %d", i, width, b, o)
			}
			seen[string(it.Key())]++
		}
		it.Close()
		db.Close()
	}
	return seen
}

func TestLoadCommand(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 300})
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	total := s.Manifest().TotalEntries()
	for _, tc := range []struct {
		width  int
		policy string
		code   int
		dirs   int // worker directories
		want   string
	}{
		{1, "", exitOK, 1, "verified: the store holds all"},
		{3, "reject", exitOK, 3, "verified"},
		{8, "reject", exitOK, 8, "verified"},
		{12, "reject", exitRefused, 0, "at most 8 workers can own state"},
		{12, "cap", exitOK, 8, "--on-excess cap started 8"},
		{12, "idle", exitOK, 12, "4 own nothing: workers 2, 5, 8, 11"},
		{3, "excise", exitOK, 3, "excised"},
		{12, "idle-excise", exitOK, 12, "4 own nothing"},
	} {
		t.Run(fmt.Sprintf("W%d-%s", tc.width, tc.policy), func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "load")
			args := []string{"load", src, "--width", fmt.Sprint(tc.width), "--into", into}
			if p, ok := strings.CutSuffix(tc.policy, "excise"); ok {
				args = append(args, "--clip", "excise")
				tc.policy = strings.TrimSuffix(p, "-")
			}
			if tc.policy != "" {
				args = append(args, "--on-excess", tc.policy)
			}
			out, code := runRoot(t, args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d and %q:\n%s", code, tc.code, tc.want, out)
			}
			if tc.code != exitOK {
				if _, err := os.Stat(into); !os.IsNotExist(err) {
					t.Errorf("refused load left %s behind", into)
				}
				return
			}
			seen := countStores(t, into, tc.dirs, 8)
			if uint64(len(seen)) != total {
				t.Errorf("stores hold %d distinct keys, snapshot %d", len(seen), total)
			}
			for k, c := range seen {
				if c != 1 {
					t.Errorf("key %x in %d stores", k, c)
				}
			}
			if _, err := os.Stat(filepath.Join(into, fmt.Sprintf("worker-%04d", tc.dirs))); !os.IsNotExist(err) {
				t.Errorf("more than %d worker directories", tc.dirs)
			}
			var rec loadReport
			data, err := os.ReadFile(filepath.Join(into, loadRecordName))
			if err != nil || json.Unmarshal(data, &rec) != nil || !rec.Verified || rec.StoreEntries != total {
				t.Errorf("load record: %v %+v", err, rec)
			}
		})
	}
}

func TestLoadCommandWorkersSubsetAndTarget(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 2, Keys: 100})
	into := filepath.Join(t.TempDir(), "load")
	out, code := runRoot(t, "--json", "load", src, "--width", "4", "--into", into, "--workers", "1,3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Workers) != 2 || rep.Workers[0].Worker != 1 || rep.Workers[1].Worker != 3 || rep.Complete || !rep.Verified {
		t.Errorf("subset report: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(into, "worker-0000")); !os.IsNotExist(err) {
		t.Error("worker 0 was built though not asked for")
	}
	// The target now exists: a second load is refused unless --force.
	if out, code := runRoot(t, "load", src, "--width", "2", "--into", into); code != exitRefused {
		t.Errorf("existing target: exit %d: %s", code, out)
	}
	if out, code := runRoot(t, "load", src, "--width", "2", "--into", into, "--force"); code != exitOK {
		t.Errorf("--force: exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(into, "worker-0003")); !os.IsNotExist(err) {
		t.Error("--force kept the old load's workers")
	}
	for _, args := range [][]string{
		{"load", src, "--width", "4", "--into", into + "2", "--workers", "4"},
		{"load", src, "--width", "0", "--into", into + "2"},
		{"load", src, "--width", "2", "--into", into + "2", "--on-excess", "spread"},
	} {
		if out, code := runRoot(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
}

// TestLoadAfterRewrite: a job at 8 buckets cannot start 40 workers; the
// same snapshot rewritten to 128 buckets loads at 40, every entry once.
func TestLoadAfterRewrite(t *testing.T) {
	src := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 400})
	root := t.TempDir()
	into := filepath.Join(root, "load-8")
	if out, code := runRoot(t, "load", src, "--width", "40", "--into", into); code != exitRefused || !strings.Contains(out, "rebucket rewrite") {
		t.Fatalf("original at 40: exit %d:\n%s", code, out)
	}
	dst := filepath.Join(root, "snap-128")
	if out, code := runRoot(t, "rewrite", src, "--buckets", "128", "--out", dst, "--memory", "64MiB"); code != exitOK {
		t.Fatalf("rewrite: exit %d:\n%s", code, out)
	}
	into = filepath.Join(root, "load-128")
	out, code := runRoot(t, "load", dst, "--width", "40", "--into", into)
	if code != exitOK || !strings.Contains(out, "verified: the 40 stores hold all") {
		t.Fatalf("rewritten at 40: exit %d:\n%s", code, out)
	}
	s, _ := reader.Open(src, reader.Options{})
	seen := countStores(t, into, 40, 128)
	if uint64(len(seen)) != s.Manifest().TotalEntries() {
		t.Errorf("stores hold %d keys, the original snapshot %d entries", len(seen), s.Manifest().TotalEntries())
	}
	// The per-worker state moved with it: source offsets split over 40.
	items := 0
	for i := 0; i < 40; i++ {
		data, err := os.ReadFile(filepath.Join(into, fmt.Sprintf("worker-%04d", i), reader.StateDir, reader.StateFileName("source", "offsets")))
		if err != nil {
			t.Fatal(err)
		}
		its, err := snapshotfmt.DecodeWorkerItems(data)
		if err != nil {
			t.Fatal(err)
		}
		items += len(its)
	}
	if items != 8 { // fixtures: 2 source partitions per worker at width 4
		t.Errorf("split offsets: %d items over 40 workers, want 8", items)
	}
}
