package reader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func TestAssignDesignExample(t *testing.T) {
	type rng struct{ lo, hi int }
	ranges := func(a reader.Assignment) []rng {
		var out []rng
		for i := 0; i < a.Width; i++ {
			lo, hi, ok := a.Range(i)
			if !ok {
				out = append(out, rng{-1, -1})
				continue
			}
			out = append(out, rng{int(lo), int(hi)})
		}
		return out
	}
	a, err := reader.Assign(8, 2, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ranges(a), []rng{{0, 3}, {4, 7}}; !slices.Equal(got, want) {
		t.Errorf("W=2: %v, want %v", got, want)
	}
	a, _ = reader.Assign(8, 4, reader.PolicyReject)
	if got, want := ranges(a), []rng{{0, 1}, {2, 3}, {4, 5}, {6, 7}}; !slices.Equal(got, want) {
		t.Errorf("W=4: %v, want %v", got, want)
	}
	_, err = reader.Assign(8, 12, reader.PolicyReject)
	if !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), "rewrite into 48 buckets") || !strings.Contains(err.Error(), "at most 8") {
		t.Errorf("W=12 reject: %v, want ErrRefused naming the ceiling and the rewrite command", err)
	}
	a, err = reader.Assign(8, 12, reader.PolicyIdle)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2, 5, 8, 11}; !slices.Equal(a.Idle, want) || a.Width != 12 {
		t.Errorf("W=12 idle: idle %v width %d, want %v and 12", a.Idle, a.Width, want)
	}
	for _, i := range a.Idle {
		if _, _, ok := a.Range(i); ok {
			t.Errorf("idle worker %d owns a range", i)
		}
	}
	a, err = reader.Assign(8, 12, reader.PolicyCap)
	if err != nil || a.Width != 8 || len(a.Idle) != 0 {
		t.Errorf("W=12 cap: %+v %v, want width 8 and no idle worker", a, err)
	}
}

// TestAssignRangesAllWidths checks, for every N up to 300 and every W up to
// N, that the ranges are contiguous, cover every bucket once and differ in
// size by at most one.
func TestAssignRangesAllWidths(t *testing.T) {
	for n := 1; n <= 300; n++ {
		for w := 1; w <= n; w++ {
			a, err := reader.Assign(n, w, reader.PolicyReject)
			if err != nil {
				t.Fatalf("N=%d W=%d: %v", n, w, err)
			}
			next, minSz, maxSz := 0, n+1, 0
			for i := 0; i < w; i++ {
				lo, hi, ok := a.Range(i)
				if !ok || int(lo) != next {
					t.Fatalf("N=%d W=%d worker %d: range %d..%d ok=%v, want to start at %d", n, w, i, lo, hi, ok, next)
				}
				sz := int(hi-lo) + 1
				minSz, maxSz = min(minSz, sz), max(maxSz, sz)
				next = int(hi) + 1
				for b := lo; b <= hi; b++ {
					if o := snapshotfmt.OwnerOf(int(b), w, n); o != i {
						t.Fatalf("N=%d W=%d: OwnerOf(%d) = %d, range says %d", n, w, b, o, i)
					}
				}
			}
			if next != n || maxSz-minSz > 1 {
				t.Fatalf("N=%d W=%d: covered %d buckets, sizes %d..%d", n, w, next, minSz, maxSz)
			}
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want reader.Policy
		ok   bool
	}{{"", reader.PolicyReject, true}, {"reject", reader.PolicyReject, true}, {"cap", reader.PolicyCap, true}, {"idle", reader.PolicyIdle, true}, {"spread", "", false}} {
		got, err := reader.ParsePolicy(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePolicy(%q) = %q, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("ParsePolicy(%q): %v, want ErrInvalidArgument", tc.in, err)
		}
	}
}

// genSnapshot writes a small snapshot with files cut small, so that many
// files straddle worker ranges at most widths.
func genSnapshot(t *testing.T, spec fixtures.Spec) (*reader.Snapshot, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, spec, writer.Options{FileSize: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

type entry struct{ k, v string }

func allEntries(t *testing.T, s *reader.Snapshot) []entry {
	t.Helper()
	it := s.NewIterAll(context.Background())
	defer it.Close()
	var out []entry
	for it.Next() {
		out = append(out, entry{string(it.Key()), string(it.Value())})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoaderEntriesAndWorkerState(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 8, Width: 3, Keys: 300})
	all := allEntries(t, s)
	m := s.Manifest()
	for _, w := range []int{1, 2, 3, 5, 8} {
		l, err := s.NewLoader(w, reader.PolicyReject)
		if err != nil {
			t.Fatal(err)
		}
		var got []entry
		for i := 0; i < w; i++ {
			it, err := l.Entries(context.Background(), i)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi, _ := l.Assignment().Range(i)
			for it.Next() {
				if b, _ := snapshotfmt.KeyBucket(it.Key()); b < lo || b > hi {
					t.Fatalf("W=%d worker %d got bucket %d outside %d..%d", w, i, b, lo, hi)
				}
				got = append(got, entry{string(it.Key()), string(it.Value())})
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
		}
		if !slices.Equal(got, all) {
			t.Fatalf("W=%d: workers' entries (%d) differ from the snapshot's (%d)", w, len(got), len(all))
		}
		checkWorkerStates(t, s, m, l)
	}
}

// checkWorkerStates checks the redistribution of every per-worker state
// against the rules, computed independently here.
func checkWorkerStates(t *testing.T, s *reader.Snapshot, m *snapshotfmt.Manifest, l *reader.Loader) {
	t.Helper()
	w := l.Width()
	all, err := l.WorkerStates()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(m.WorkerStates) || len(m.WorkerStates) == 0 {
		t.Fatalf("%d redistributed states, manifest has %d", len(all), len(m.WorkerStates))
	}
	for k, ws := range m.WorkerStates {
		var old [][][]byte
		for _, wf := range ws.Files {
			items, err := s.ReadWorkerFile(wf)
			if err != nil {
				t.Fatal(err)
			}
			old = append(old, items)
		}
		for i := 0; i < w; i++ {
			var want [][]byte
			switch {
			case len(old) == w:
				// An unchanged width keeps every worker's own items.
				want = old[i]
			case ws.Rule == snapshotfmt.RuleSplit:
				j := 0
				for _, items := range old {
					for _, it := range items {
						if j%w == i {
							want = append(want, it)
						}
						j++
					}
				}
			case ws.Rule == snapshotfmt.RuleUnion:
				for _, items := range old {
					want = append(want, items...)
				}
			case ws.Rule == snapshotfmt.RuleBroadcast:
				want = old[0]
			}
			got := all[k][i].Items
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("W=%d state %s worker %d: %q, want %q", w, ws.QualifiedName(), i, got, want)
			}
		}
	}
}

// TestBuildStores loads a snapshot at several widths and policies into
// Pebble stores and finds every entry exactly once, in its owner's store.
func TestBuildStores(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 400, ValueSpread: true})
	all := allEntries(t, s)
	m := s.Manifest()
	for _, tc := range []struct {
		w      int
		policy reader.Policy
		width  int // workers started
		idle   []int
	}{
		{1, reader.PolicyReject, 1, nil},
		{3, reader.PolicyReject, 3, nil},
		{8, reader.PolicyReject, 8, nil},
		{12, reader.PolicyCap, 8, nil},
		{12, reader.PolicyIdle, 12, []int{2, 5, 8, 11}},
	} {
		for _, mode := range []reader.ClipMode{reader.ClipRewrite, reader.ClipExcise} {
			t.Run(fmt.Sprintf("W%d-%s-%s", tc.w, tc.policy, mode), func(t *testing.T) {
				l, err := s.NewLoader(tc.w, tc.policy)
				if err != nil {
					t.Fatal(err)
				}
				if l.Width() != tc.width || !slices.Equal(l.Assignment().Idle, append([]int{}, tc.idle...)) {
					t.Fatalf("width %d idle %v, want %d %v", l.Width(), l.Assignment().Idle, tc.width, tc.idle)
				}
				root := t.TempDir()
				seen := map[string]int{}
				var ingested, rewritten int
				for i := 0; i < l.Width(); i++ {
					dir := filepath.Join(root, fmt.Sprintf("worker-%04d", i))
					st, err := l.BuildStoreWith(context.Background(), i, dir, reader.BuildOptions{Clip: mode})
					if err != nil {
						t.Fatal(err)
					}
					ingested += st.IngestedFiles
					rewritten += st.RewrittenFiles
					if mode == reader.ClipExcise && st.RewrittenFiles != 0 {
						t.Errorf("worker %d rewrote %d files under excise", i, st.RewrittenFiles)
					}
					if slices.Contains(tc.idle, i) != !st.Owns {
						t.Errorf("worker %d owns=%v", i, st.Owns)
					}
					chk, err := l.CheckStore(context.Background(), i, dir)
					if err != nil {
						t.Fatal(err)
					}
					if chk.Entries != st.Entries || chk.Outside != 0 {
						t.Errorf("worker %d: store holds %d entries (%d outside), manifest says %d", i, chk.Entries, chk.Outside, st.Entries)
					}
					// Read the store back with Pebble directly.
					db, err := reader.OpenStore(dir)
					if err != nil {
						t.Fatal(err)
					}
					it, _ := db.NewIter(nil)
					lo, hi, _ := l.Assignment().Range(i)
					for ok := it.First(); ok; ok = it.Next() {
						b, _ := snapshotfmt.KeyBucket(it.Key())
						if !st.Owns || b < lo || b > hi {
							t.Errorf("worker %d holds bucket %d", i, b)
						}
						v, _ := it.ValueAndErr()
						seen[string(it.Key())+"\x00"+string(v)]++
					}
					it.Close()
					db.Close()
					// Per-worker state files hold the redistributed items.
					states, err := l.WorkerState(i)
					if err != nil {
						t.Fatal(err)
					}
					for _, ws := range states {
						data, err := os.ReadFile(filepath.Join(dir, reader.StateDir, reader.StateFileName(ws.Step, ws.Name)))
						if err != nil {
							t.Fatal(err)
						}
						items, err := snapshotfmt.DecodeWorkerItems(data)
						if err != nil || !slices.EqualFunc(items, ws.Items, bytes.Equal) {
							t.Errorf("worker %d state %s file differs: %v", i, ws.QualifiedName(), err)
						}
					}
					if _, err := os.Stat(filepath.Join(dir, "ingest")); !os.IsNotExist(err) {
						t.Errorf("worker %d: staging directory left behind", i)
					}
				}
				if len(seen) != len(all) {
					t.Errorf("stores hold %d distinct entries, snapshot %d", len(seen), len(all))
				}
				for _, e := range all {
					if seen[e.k+"\x00"+e.v] != 1 {
						t.Fatalf("entry %x found %d times", e.k, seen[e.k+"\x00"+e.v])
					}
				}
				if len(m.Files) > 1 && tc.width > 1 && (ingested == 0 || rewritten == 0) {
					t.Logf("ingested %d, rewritten %d files", ingested, rewritten)
				}
				checkWorkerStates(t, s, m, l)
			})
		}
	}
	// The snapshot's files are untouched (ingest removes what it is given).
	for _, df := range m.Files {
		if _, err := os.Stat(s.Path(df.Path)); err != nil {
			t.Fatalf("snapshot file %s: %v", df.Path, err)
		}
	}
	if _, err := reader.Open(s.Dir(), reader.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := len(allEntries(t, s)); n != len(all) {
		t.Fatalf("snapshot reads %d entries after loading, %d before", n, len(all))
	}
}

func TestBuildStoreIngestsAndClips(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 400})
	l, err := s.NewLoader(3, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	var ingested, rewritten int
	for i := 0; i < 3; i++ {
		part, _ := l.Worker(i)
		st, err := l.BuildStore(context.Background(), i, filepath.Join(t.TempDir(), "w"))
		if err != nil {
			t.Fatal(err)
		}
		whole := 0
		for _, f := range part.Files {
			if f.Whole {
				whole++
			}
		}
		if st.IngestedFiles != whole || st.RewrittenFiles != len(part.Files)-whole {
			t.Errorf("worker %d: ingested %d rewritten %d, files %d whole %d", i, st.IngestedFiles, st.RewrittenFiles, len(part.Files), whole)
		}
		ingested += st.IngestedFiles
		rewritten += st.RewrittenFiles
	}
	// 8 buckets over 3 workers cut buckets 2 and 5 between workers' ranges
	// (0..2, 3..5, 6..7): files holding buckets 2..3 or 5..6 straddle.
	if ingested == 0 {
		t.Errorf("no file was ingested whole")
	}
	t.Logf("ingested %d, rewritten %d", ingested, rewritten)
}

func TestBuildStoreRefusesNonEmptyDir(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 20})
	l, _ := s.NewLoader(2, reader.PolicyReject)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := l.BuildStore(context.Background(), 0, dir); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("non-empty dir: %v, want ErrRefused", err)
	}
	if _, err := l.BuildStore(context.Background(), 2, t.TempDir()); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Fatalf("worker 2 of 2: %v, want ErrInvalidArgument", err)
	}
}

func TestBuildStoreDamagedFileRefused(t *testing.T) {
	s, dir := genSnapshot(t, fixtures.Spec{Buckets: 4, Width: 1, Keys: 50})
	df := s.Manifest().Files[0]
	p := filepath.Join(dir, df.Path)
	data, _ := os.ReadFile(p)
	data[len(data)/2] ^= 0xff
	os.WriteFile(p, data, 0o644)
	for _, w := range []int{1, 3} { // ingested whole, and clipped
		l, _ := s.NewLoader(w, reader.PolicyReject)
		corrupt := 0
		for i := 0; i < w; i++ {
			_, err := l.BuildStore(context.Background(), i, filepath.Join(t.TempDir(), "w"))
			if errors.Is(err, snapshotfmt.ErrCorrupt) {
				corrupt++
			} else if err != nil {
				t.Fatalf("W=%d worker %d: %v", w, i, err)
			}
		}
		if corrupt == 0 {
			t.Errorf("W=%d: the damaged file was loaded", w)
		}
	}
}

// TestWorkerStateRules checks split, union and broadcast on a snapshot
// written at width 3 with known items, loaded at widths 1, 2 and 5.
func TestWorkerStateRules(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	part, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 4)
	w, err := writer.Create(dir, writer.Header{Partitioning: part, WidthAtWrite: 3, States: fixtures.States, Tool: "test"}, writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	items := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	if err := w.WriteWorkerState("src", "offsets", snapshotfmt.RuleSplit, [][][]byte{items("a0", "a1"), items("b0"), items("c0", "c1", "c2")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteWorkerState("agg", "seen", snapshotfmt.RuleUnion, [][][]byte{items("x"), items(), items("y", "z")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteWorkerState("enrich", "table", snapshotfmt.RuleBroadcast, [][][]byte{items("t1", "t2"), items("t1", "t2"), items("t1", "t2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	str := func(b [][]byte) string {
		var parts []string
		for _, x := range b {
			parts = append(parts, string(x))
		}
		return strings.Join(parts, ",")
	}
	for _, tc := range []struct {
		w                int
		policy           reader.Policy
		split, union, bc []string
	}{
		{1, reader.PolicyReject, []string{"a0,a1,b0,c0,c1,c2"}, []string{"x,y,z"}, []string{"t1,t2"}},
		{2, reader.PolicyReject, []string{"a0,b0,c1", "a1,c0,c2"}, []string{"x,y,z", "x,y,z"}, []string{"t1,t2", "t1,t2"}},
		{5, reader.PolicyIdle, []string{"a0,c2", "a1", "b0", "c0", "c1"}, []string{"x,y,z", "x,y,z", "x,y,z", "x,y,z", "x,y,z"}, []string{"t1,t2", "t1,t2", "t1,t2", "t1,t2", "t1,t2"}},
	} {
		l, err := s.NewLoader(tc.w, tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < tc.w; i++ {
			st, err := l.WorkerState(i)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, x := range st {
				got[x.QualifiedName()] = str(x.Items)
			}
			if got["src/offsets"] != tc.split[i] || got["agg/seen"] != tc.union[i] || got["enrich/table"] != tc.bc[i] {
				t.Errorf("W=%d worker %d: %v, want split %q union %q broadcast %q", tc.w, i, got, tc.split[i], tc.union[i], tc.bc[i])
			}
		}
	}
}
