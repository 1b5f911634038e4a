package rewrite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

func generate(t testing.TB, dir string, spec fixtures.Spec, opts writer.Options) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("src-%s-%d", spec.Mapping, spec.Buckets))
	if _, err := fixtures.Generate(context.Background(), p, spec, opts); err != nil {
		t.Fatal(err)
	}
	return p
}

// contents is a snapshot read back entry by entry, with every check that
// does not need the source.
type contents struct {
	entries map[string]int // "step/name\x00key\x00subkey\x00value" -> count
	total   int
	workers map[string][]string // "step/name rule" -> raw file per worker
	m       *snapshotfmt.Manifest
}

func readAll(t testing.TB, dir string, rename map[string]string) contents {
	t.Helper()
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest()
	names := map[uint16]string{}
	for _, st := range m.States {
		q := st.QualifiedName()
		if r, ok := rename[q]; ok {
			q = r
		}
		names[st.ID] = q
	}
	c := contents{entries: map[string]int{}, workers: map[string][]string{}, m: m}
	bEntries := make([]uint64, m.Partitioning.Buckets)
	bBytes := make([]uint64, m.Partitioning.Buckets)
	it := s.NewIterAll(context.Background())
	defer it.Close()
	for it.Next() {
		dk, err := snapshotfmt.DecodeKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if want := m.Partitioning.Bucket(dk.Key); dk.Bucket != want {
			t.Fatalf("%s: key %q in bucket %d, hashes to %d", dir, dk.Key, dk.Bucket, want)
		}
		bEntries[dk.Bucket]++
		bBytes[dk.Bucket] += uint64(len(it.Key()) + len(it.Value()))
		c.entries[names[dk.State]+"\x00"+string(dk.Key)+"\x00"+string(dk.SubKey)+"\x00"+string(it.Value())]++
		c.total++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	for b := range bEntries {
		if bEntries[b] != m.BucketEntries[b] || bBytes[b] != m.BucketBytes[b] {
			t.Fatalf("%s: bucket %d holds %d entries, %d bytes; the manifest says %d, %d", dir, b, bEntries[b], bBytes[b], m.BucketEntries[b], m.BucketBytes[b])
		}
	}
	for _, ws := range m.WorkerStates {
		q := ws.QualifiedName()
		if r, ok := rename[q]; ok {
			q = r
		}
		k := q + " " + string(ws.Rule)
		for _, wf := range ws.Files {
			raw, err := s.ReadWorkerFileRaw(wf)
			if err != nil {
				t.Fatal(err)
			}
			c.workers[k] = append(c.workers[k], string(raw))
		}
	}
	return c
}

func sameContents(t *testing.T, src, dst contents, drop map[string]bool) {
	t.Helper()
	want := map[string]int{}
	for k, n := range src.entries {
		st, _, _ := strings.Cut(k, "\x00")
		if !drop[st] {
			want[k] = n
		}
	}
	for k, n := range want {
		if dst.entries[k] != n {
			t.Fatalf("entry %q: %d in source, %d in target", k, n, dst.entries[k])
		}
	}
	for k, n := range dst.entries {
		if want[k] != n {
			t.Fatalf("entry %q: %d in target, %d in source", k, n, want[k])
		}
	}
	for k, files := range src.workers {
		st, _, _ := strings.Cut(k, " ")
		if drop[st] {
			if _, ok := dst.workers[k]; ok {
				t.Fatalf("dropped per-worker state %s is in the target", k)
			}
			continue
		}
		got := dst.workers[k]
		if len(got) != len(files) {
			t.Fatalf("per-worker state %s: %d files, want %d", k, len(got), len(files))
		}
		for i := range files {
			if got[i] != files[i] {
				t.Fatalf("per-worker state %s worker %d differs", k, i)
			}
		}
	}
}

// treeHash fingerprints everything under dir (fixtures.TreeHash).
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h, err := fixtures.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRewriteProperties(t *testing.T) {
	type tc struct {
		n       int
		from    snapshotfmt.Mapping
		m       int
		to      snapshotfmt.Mapping
		want    plan.Strategy
		memory  int64
		passes  int
		keys    int
		fileMiB int64
	}
	mod, rng := snapshotfmt.MappingMod, snapshotfmt.MappingRange
	cases := []tc{
		{n: 8, from: mod, m: 64, to: mod, want: plan.StrategySplit},
		{n: 8, from: rng, m: 64, to: rng, want: plan.StrategySplit},
		{n: 1, from: mod, m: 8, to: mod, want: plan.StrategySplit},
		{n: 8, from: mod, m: 8, to: mod, want: plan.StrategySplit},
		{n: 4, from: mod, m: 1024, to: mod, want: plan.StrategySplit, memory: 1 << 30, passes: 1},
		{n: 4, from: rng, m: 1024, to: rng, want: plan.StrategySplit, memory: 1 << 30, passes: 1},
		{n: 8, from: mod, m: 1, to: mod, want: plan.StrategyMerge},
		{n: 64, from: mod, m: 8, to: mod, want: plan.StrategyMerge},
		{n: 128, from: rng, m: 1000, to: rng, want: plan.StrategyMerge},
		{n: 1000, from: rng, m: 128, to: rng, want: plan.StrategyMerge},
		{n: 7, from: rng, m: 3, to: rng, want: plan.StrategyMerge},
		{n: 3, from: rng, m: 1, to: rng, want: plan.StrategyMerge},
		{n: 5, from: rng, m: 7, to: rng, want: plan.StrategyMerge},
		{n: 8, from: mod, m: 12, to: mod, want: plan.StrategyShuffle},
		{n: 8, from: mod, m: 7, to: mod, want: plan.StrategyShuffle},
		{n: 5, from: mod, m: 3, to: mod, want: plan.StrategyShuffle},
		{n: 8, from: mod, m: 64, to: rng, want: plan.StrategyShuffle},
		{n: 8, from: rng, m: 8, to: mod, want: plan.StrategyShuffle},
		{n: 8, from: mod, m: 1, to: rng, want: plan.StrategyShuffle},
		{n: 1, from: mod, m: 32768, to: mod, want: plan.StrategySplit},
		{n: 8, from: mod, m: 32768, to: mod, want: plan.StrategySplit},
		{n: 1, from: rng, m: 32768, to: rng, want: plan.StrategySplit},
		{n: 8, from: mod, m: 65536, to: mod, want: plan.StrategySplit},
		// Small files: buckets span several files and files hold several
		// buckets.
		{n: 16, from: mod, m: 40, to: mod, want: plan.StrategyShuffle, fileMiB: 1},
		{n: 16, from: rng, m: 40, to: rng, want: plan.StrategyMerge, fileMiB: 1},
	}
	tmp := t.TempDir()
	for _, c := range cases {
		name := fmt.Sprintf("%s%d-%s%d", c.from, c.n, c.to, c.m)
		t.Run(name, func(t *testing.T) {
			keys := c.keys
			if keys == 0 {
				keys = 400
			}
			fileSize := int64(64 << 20)
			if c.fileMiB > 0 {
				fileSize = 16 << 10
			}
			sd := filepath.Join(tmp, name)
			if err := os.Mkdir(sd, 0o755); err != nil {
				t.Fatal(err)
			}
			src := generate(t, sd, fixtures.Spec{Buckets: c.n, Width: min(c.n, 3), Mapping: c.from, Keys: keys, ValueSpread: true, Seed: uint64(c.n)}, writer.Options{FileSize: fileSize})
			before := treeHash(t, src)
			sc := readAll(t, src, nil)
			mem := c.memory
			if mem == 0 {
				mem = 64 << 20
			}
			to, err := snapshotfmt.NewPartitioning(c.to, c.m)
			if err != nil {
				t.Fatal(err)
			}
			var planned plan.RewritePlan
			dst := filepath.Join(sd, "dst")
			prog := &progress.Recorder{}
			sum, err := Run(context.Background(), Options{
				Source: src, Target: dst, To: to, Memory: mem, Parallelism: 2, FileSize: fileSize,
				Tool: "test", Note: "prop", OnPlan: func(p plan.RewritePlan) { planned = p }, Progress: prog,
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Strategy != c.want || planned.Strategy != c.want {
				t.Fatalf("strategy %s (planned %s), want %s: %s", sum.Strategy, planned.Strategy, c.want, planned.Reason)
			}
			if c.passes > 0 && planned.Passes != c.passes {
				t.Fatalf("passes %d, want %d", planned.Passes, c.passes)
			}
			dc := readAll(t, dst, nil)
			sameContents(t, sc, dc, nil)
			if v := sum.Verification; !v.Verified || v.Checked != "fingerprints" || v.Errors != 0 {
				t.Fatalf("self-check: %+v", v)
			}
			if dc.m.Partitioning != to || dc.m.WidthAtWrite != sc.m.WidthAtWrite {
				t.Fatalf("target partitioning %v width %d", dc.m.Partitioning, dc.m.WidthAtWrite)
			}
			last := dc.m.Lineage[len(dc.m.Lineage)-1]
			if len(dc.m.Lineage) != len(sc.m.Lineage)+1 || last.Action != "rewrite" || last.FromBuckets != uint32(c.n) ||
				last.ToBuckets != uint32(c.m) || last.FromMapping != c.from || last.ToMapping != c.to || last.Note != "prop" {
				t.Fatalf("lineage %+v", dc.m.Lineage)
			}
			for i, st := range dc.m.States {
				want := sc.m.States[i]
				want.Entries = st.Entries
				if st != want {
					t.Fatalf("state %+v, want %+v", st, want)
				}
			}
			// Every phase reaches its announced total; the reading phases
			// (a shuffle also reports its merge and write) count the source.
			var read int64
			for _, p := range prog.Phases() {
				if p.Done != p.Total && !(p.Total == 0 && p.Done == 0) {
					t.Fatalf("progress phase %q counted %d bytes of %d announced", p.What, p.Done, p.Total)
				}
				if !strings.Contains(p.What, "merge and write") {
					read += p.Done
				}
			}
			if read != int64(sc.m.TotalBytes()) {
				t.Fatalf("progress counted %d bytes read of %d: %+v", read, sc.m.TotalBytes(), prog.Phases())
			}
			if sum.Entries != uint64(sc.total) {
				t.Fatalf("summary entries %d, want %d", sum.Entries, sc.total)
			}
			if after := treeHash(t, src); after != before {
				t.Fatal("source changed")
			}
			noLeftovers(t, sd)
			os.RemoveAll(dst)
		})
	}
}

// The self-check passes a correct output and fails one whose
// fingerprints disagree with the scan's, running the exact comparison.
func TestSelfCheckDetectsMismatch(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if _, err := fixtures.Generate(context.Background(), src, fixtures.Spec{Buckets: 8, Keys: 200}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(tmp, "dst")
	opts := Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: 5}, NoVerify: true}
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verification.Checked != "skipped" {
		t.Fatalf("NoVerify: %+v", sum.Verification)
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := verify.Fingerprints(context.Background(), s, sum.To, verify.FingerprintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := selfCheck(context.Background(), opts, dst, s, sum, want)
	if err != nil || !v.Verified {
		t.Fatalf("untampered: %+v %v", v, err)
	}
	want.Buckets[3].Lo++
	var named int
	opts.Findings = func(verify.Finding) { named++ }
	v, err = selfCheck(context.Background(), opts, dst, s, sum, want)
	if err != nil || v.Verified || v.ByKind["fingerprint"] != 1 || v.Checked != "equality" || !strings.Contains(v.Detail, "FAILED") {
		t.Fatalf("tampered: %+v %v", v, err)
	}
	if named != 0 {
		t.Fatalf("the exact comparison named %d differences in equal snapshots", named)
	}
}

// noLeftovers fails if dir holds temporary, lock or spill files of a run.
func noLeftovers(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "rebucket") {
			t.Fatalf("leftover %s in %s", e.Name(), dir)
		}
	}
}

func TestRewriteDropRename(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Keys: 300}, writer.Options{})
	sc := readAll(t, src, nil)
	dst := filepath.Join(tmp, "dst")
	sum, err := Run(context.Background(), Options{
		Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: 16}, Tool: "test", Note: "tidy",
		DropStates:   []string{"window/events", "enrich/countries"},
		RenameStates: []string{"count/per_user=per_key", "source/offsets=ingest/offsets"},
	})
	if err != nil {
		t.Fatal(err)
	}
	dc := readAll(t, dst, map[string]string{"count/per_key": "count/per_user", "ingest/offsets": "source/offsets"})
	drop := map[string]bool{"window/events": true, "enrich/countries": true}
	sameContents(t, sc, dc, drop)
	if !sum.Verification.Verified {
		t.Fatalf("self-check: %+v", sum.Verification)
	}
	if _, ok := dc.m.StateByName("count/per_key"); !ok {
		t.Fatal("renamed state missing")
	}
	if _, ok := dc.m.StateByName("window/events"); ok {
		t.Fatal("dropped state still listed")
	}
	var want uint64
	for _, st := range sc.m.States {
		if st.QualifiedName() == "window/events" {
			want = st.Entries
		}
	}
	if sum.DroppedEntries != want || want == 0 {
		t.Fatalf("dropped %d entries, want %d", sum.DroppedEntries, want)
	}
	note := dc.m.Lineage[len(dc.m.Lineage)-1].Note
	for _, s := range []string{"tidy", "dropped state window/events", "renamed state count/per_user=count/per_key"} {
		if !strings.Contains(note, s) {
			t.Fatalf("lineage note %q lacks %q", note, s)
		}
	}
}

func TestRewriteRefusals(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 4, Keys: 50}, writer.Options{})
	full := filepath.Join(tmp, "full")
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644)
	cases := []struct {
		name   string
		target string
		mod    func(*Options)
		is     error
	}{
		{"target is source", src, nil, snapshotfmt.ErrRefused},
		{"target inside source", filepath.Join(src, "data", "x"), nil, snapshotfmt.ErrRefused},
		{"source inside target", tmp, func(o *Options) { o.Force = true }, snapshotfmt.ErrRefused},
		{"target not empty", full, nil, snapshotfmt.ErrRefused},
		{"bad drop", filepath.Join(tmp, "a"), func(o *Options) { o.DropStates = []string{"no/such"} }, snapshotfmt.ErrInvalidArgument},
		{"bad rename", filepath.Join(tmp, "b"), func(o *Options) { o.RenameStates = []string{"count/per_user=sessions/open"} }, snapshotfmt.ErrInvalidArgument},
		{"bad buckets", filepath.Join(tmp, "c"), func(o *Options) { o.To.Buckets = 70000 }, snapshotfmt.ErrInvalidArgument},
		{"tmp missing", filepath.Join(tmp, "f"), func(o *Options) { o.TmpDir = filepath.Join(tmp, "nope") }, snapshotfmt.ErrInvalidArgument},
		{"tiny memory works", filepath.Join(tmp, "d"), func(o *Options) { o.Memory = 1 << 20 }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Source: src, Target: c.target, To: snapshotfmt.Partitioning{Buckets: 16}}
			if c.mod != nil {
				c.mod(&o)
			}
			_, err := Run(context.Background(), o)
			if c.is == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.is) {
				t.Fatalf("err %v, want %v", err, c.is)
			}
		})
	}
	if err := CheckDisk(filepath.Join(tmp, "e"), tmp, 1<<62, 0); !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("disk check: %v", err)
	}
	if err := CheckDisk(filepath.Join(tmp, "e"), tmp, 1, 1<<62); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("disk check with spill: %v", err)
	}
}

func TestRewriteEmptySource(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 4, Keys: 20, EmptyBuckets: []int{0, 1, 2, 3}}, writer.Options{})
	for _, to := range []snapshotfmt.Partitioning{{Buckets: 8}, {Buckets: 2}, {Buckets: 3}, {Buckets: 5, Mapping: snapshotfmt.MappingRange}} {
		dst := filepath.Join(tmp, fmt.Sprint("dst", to.Buckets))
		sum, err := Run(context.Background(), Options{Source: src, Target: dst, To: to})
		if err != nil {
			t.Fatal(err)
		}
		dc := readAll(t, dst, nil)
		if sum.Entries != 0 || dc.total != 0 || len(dc.m.Files) != 0 || len(dc.workers) != 2 {
			t.Fatalf("%v: %d entries, %d files, %d per-worker states", to, dc.total, len(dc.m.Files), len(dc.workers))
		}
	}
}

func TestShuffleSpills(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Keys: 8000, ValueSize: 64}, writer.Options{FileSize: 1 << 20})
	sc := readAll(t, src, nil)
	spill := filepath.Join(tmp, "spill")
	os.Mkdir(spill, 0o755)
	mem := int64(1 << 20)
	if sc.m.TotalBytes() < 4*uint64(mem) {
		t.Fatalf("snapshot of %d bytes is not 4x the budget", sc.m.TotalBytes())
	}
	dst := filepath.Join(tmp, "dst")
	sum, err := Run(context.Background(), Options{Source: src, Target: dst, To: snapshotfmt.Partitioning{Buckets: 13}, Memory: mem, TmpDir: spill, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Strategy != plan.StrategyShuffle || sum.SpilledRuns < 4 || sum.SpilledBytes < int64(sc.m.TotalBytes())/2 {
		t.Fatalf("strategy %s, %d runs, %d bytes spilled of %d", sum.Strategy, sum.SpilledRuns, sum.SpilledBytes, sc.m.TotalBytes())
	}
	sameContents(t, sc, readAll(t, dst, nil), nil)
	if ents, _ := os.ReadDir(spill); len(ents) != 0 {
		t.Fatalf("spill directory not empty: %v", ents)
	}
}

// countProgress adds up what is reported.
type countProgress struct {
	total int64
	n     atomic.Int64
}

func (c *countProgress) Start(total int64, _ string) { c.total = total }
func (c *countProgress) Finish()                     {}
func (c *countProgress) Add(n int64)                 { c.n.Add(n) }

// cancelAfter cancels a context once some progress has been made.
type cancelAfter struct {
	cancel context.CancelFunc
	n      atomic.Int64
	after  int64
}

func (c *cancelAfter) Start(int64, string) {}
func (c *cancelAfter) Finish()             {}
func (c *cancelAfter) Add(n int64) {
	if c.n.Add(n) >= c.after {
		c.cancel()
	}
}

func TestRewriteInterrupted(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Keys: 6000}, writer.Options{FileSize: 1 << 20})
	before := treeHash(t, src)
	for _, to := range []snapshotfmt.Partitioning{{Buckets: 64}, {Buckets: 4}, {Buckets: 13}} {
		t.Run(fmt.Sprint(to.Buckets), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			spill := filepath.Join(tmp, "spill")
			os.MkdirAll(spill, 0o755)
			dst := filepath.Join(tmp, "dst")
			_, err := Run(ctx, Options{Source: src, Target: dst, To: to, Memory: 1 << 20, TmpDir: spill,
				Progress: &cancelAfter{cancel: cancel, after: 2 << 20}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("target exists after interrupt: %v", err)
			}
			var left []string
			ents, _ := os.ReadDir(tmp)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") {
					left = append(left, e.Name())
				}
			}
			if ents, _ := os.ReadDir(spill); len(ents) != 0 {
				left = append(left, "spill/"+ents[0].Name())
			}
			sort.Strings(left)
			if len(left) > 0 {
				t.Fatalf("leftovers after interrupt: %v", left)
			}
			if treeHash(t, src) != before {
				t.Fatal("source changed")
			}
		})
	}
}
