package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// EqualOptions tune Equal. The zero value works.
type EqualOptions struct {
	// MaxDiffs is how many differences of each kind are listed (default
	// 10); the rest are counted.
	MaxDiffs int
	// Parallelism is how many files are read at once (default GOMAXPROCS).
	Parallelism int
	// DiffMemory bounds the logical bytes of the buckets diffed exactly in
	// one pass over the source (default 512 MiB); more differing buckets
	// take more passes.
	DiffMemory int64
	Progress   progress.Reporter
}

// EqualSummary is the outcome of Equal.
type EqualSummary struct {
	Target           string                   `json:"target"`
	Source           string                   `json:"source"`
	Equal            bool                     `json:"equal"`
	TargetLayout     snapshotfmt.Partitioning `json:"target_partitioning"`
	SourceLayout     snapshotfmt.Partitioning `json:"source_partitioning"`
	TargetEntries    uint64                   `json:"target_entries"`
	SourceEntries    uint64                   `json:"source_entries"`
	Buckets          int                      `json:"buckets_compared"`
	BucketsDiffering int                      `json:"buckets_differing"`
	DiffPasses       int                      `json:"diff_passes"`
	WorkerStates     int                      `json:"worker_states_compared"`
	Errors           int                      `json:"errors"`
	Warnings         int                      `json:"warnings"`
	ByKind           map[Kind]int             `json:"by_kind"`
	Incomplete       []string                 `json:"incomplete,omitempty"`
	Elapsed          time.Duration            `json:"-"`
	Seconds          float64                  `json:"elapsed_seconds"`
}

// maxMisplacedKept bounds the misplaced TARGET entries kept in memory for
// the exact diff of the buckets they belong in.
const maxMisplacedKept = 100_000

// Equal proves that TARGET holds exactly SOURCE's entries (the multiset of
// (step, state name, key, sub-key, value)) and per-worker state, whatever
// the two layouts, and that every TARGET entry sits in the bucket its key
// hashes to. Differences stream to sink, at most MaxDiffs listed per kind.
// It returns an error only when it could not run (a snapshot that cannot
// be opened or read: run Check on it).
//
// Per-worker state is compared per (step, name): the rule must match; at
// equal widths each worker's item list must be equal; at different widths
// split state compares the multiset of all items, union state the set of
// items, and broadcast state worker 0's copy.
func Equal(ctx context.Context, target, source string, opts EqualOptions, sink Sink) (*EqualSummary, error) {
	start := time.Now()
	if opts.MaxDiffs <= 0 {
		opts.MaxDiffs = 10
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.DiffMemory <= 0 {
		opts.DiffMemory = 512 << 20
	}
	em := newEmitter(sink)
	sum := &EqualSummary{Target: target, Source: source}
	finish := func() *EqualSummary {
		sum.Errors, sum.Warnings, sum.ByKind = em.errors, em.warnings, em.byKind
		sum.Equal = em.errors == 0 && len(sum.Incomplete) == 0
		sum.Elapsed = time.Since(start)
		sum.Seconds = sum.Elapsed.Seconds()
		return sum
	}
	tgt, err := openManifest(target, em)
	if err != nil {
		return finish(), fmt.Errorf("target: %w", err)
	}
	src, err := openManifest(source, em)
	if err != nil {
		return finish(), fmt.Errorf("source: %w", err)
	}
	e := &equaler{ctx: ctx, opts: opts, em: em, tgt: tgt, src: src, sum: sum,
		caps: map[Kind]int{}, layout: tgt.Manifest().Partitioning}
	e.tstates = stateTable(tgt.Manifest().States)
	e.sstates = stateTable(src.Manifest().States)
	sum.TargetLayout, sum.SourceLayout = e.layout, src.Manifest().Partitioning
	sum.TargetEntries, sum.SourceEntries = tgt.Manifest().TotalEntries(), src.Manifest().TotalEntries()
	sum.Buckets = int(e.layout.Buckets)
	e.compareStates()
	if err := e.run(); err != nil {
		return finish(), err
	}
	e.compareWorkerStates()
	e.flushCaps()
	return finish(), ctx.Err()
}

type equaler struct {
	ctx              context.Context
	opts             EqualOptions
	em               *emitter
	tgt, src         *reader.Snapshot
	tstates, sstates []*stateInfo
	layout           snapshotfmt.Partitioning
	sum              *EqualSummary

	mu                sync.Mutex
	caps              map[Kind]int
	misplaced         []entryCopy
	misplacedOverflow bool
}

type entryCopy struct {
	bucket     uint32
	key, value []byte
}

// emitCapped lists at most MaxDiffs findings per kind and counts the rest.
func (e *equaler) emitCapped(f Finding) {
	e.mu.Lock()
	e.caps[f.Kind]++
	n := e.caps[f.Kind]
	e.mu.Unlock()
	if n <= e.opts.MaxDiffs {
		e.em.emit(f)
	}
}

func (e *equaler) flushCaps() {
	kinds := make([]Kind, 0, len(e.caps))
	for k := range e.caps {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		if more := e.caps[k] - e.opts.MaxDiffs; more > 0 {
			e.em.mu.Lock()
			e.em.count(k, SevError, more-1)
			e.em.mu.Unlock()
			e.em.emit(newFinding(k, SevError, "%d more %s differences are not listed (raise --max-diffs)", more, k))
		}
	}
}

// compareStates reports states (by step and name) that only one side has,
// or whose kinds differ; their entries then show as missing or extra.
func (e *equaler) compareStates() {
	tm, sm := e.tgt.Manifest(), e.src.Manifest()
	for _, s := range sm.States {
		t, ok := tm.StateByName(s.QualifiedName())
		switch {
		case !ok && s.Entries > 0:
			f := newFinding(Missing, SevError, "state %s (%d entries) is not in TARGET's states table", s.QualifiedName(), s.Entries)
			f.State = s.QualifiedName()
			e.emitCapped(f)
		case ok && t.Kind != s.Kind:
			f := newFinding(Changed, SevError, "state kind is %s in TARGET, %s in SOURCE", t.Kind, s.Kind)
			f.State = s.QualifiedName()
			e.emitCapped(f)
		}
	}
	for _, t := range tm.States {
		if _, ok := sm.StateByName(t.QualifiedName()); !ok && t.Entries > 0 {
			f := newFinding(Extra, SevError, "state %s (%d entries) is not in SOURCE's states table", t.QualifiedName(), t.Entries)
			f.State = t.QualifiedName()
			e.emitCapped(f)
		}
	}
}

func (e *equaler) entryFinding(kind Kind, si *stateInfo, key, sub []byte, bucket uint32, format string, args ...any) Finding {
	f := newFinding(kind, SevError, format, args...)
	f.Bucket = int64(bucket)
	return f.withKey(si.st, key, sub, si.hasSub)
}

func (e *equaler) run() error {
	onTarget := func(key, value []byte, b, stored uint32) {
		if b == stored {
			return
		}
		dk, _ := snapshotfmt.DecodeKey(key)
		si := e.tstates[dk.State]
		e.emitCapped(e.entryFinding(Misplaced, si, dk.Key, dk.SubKey, stored,
			"stored in bucket %d of TARGET, but the key hashes to bucket %d under %s", stored, b, e.layout))
		e.mu.Lock()
		if len(e.misplaced) < maxMisplacedKept {
			e.misplaced = append(e.misplaced, entryCopy{bucket: b, key: bytes.Clone(key), value: bytes.Clone(value)})
		} else {
			e.misplacedOverflow = true
		}
		e.mu.Unlock()
	}
	fps, err := fingerprintFiles(e.ctx, []side{
		{snap: e.tgt, layout: e.layout, onEntry: onTarget},
		{snap: e.src, layout: e.layout},
	}, e.opts.Parallelism, progress.OrNop(e.opts.Progress))
	if err != nil {
		return err
	}
	diff := fps[0].Differ(fps[1])
	e.sum.BucketsDiffering = len(diff)
	if e.misplacedOverflow {
		e.sum.Incomplete = append(e.sum.Incomplete, fmt.Sprintf("over %d misplaced entries: the exact diff may list some of them as missing", maxMisplacedKept))
	}
	// Batch the differing buckets so one batch's entries fit DiffMemory.
	tm := e.tgt.Manifest()
	for len(diff) > 0 {
		var batch []uint32
		var mem int64
		for len(diff) > 0 && (len(batch) == 0 || mem+2*int64(tm.BucketBytes[diff[0]]) <= e.opts.DiffMemory) {
			mem += 2*int64(tm.BucketBytes[diff[0]]) + 64*int64(tm.BucketEntries[diff[0]])
			batch = append(batch, diff[0])
			diff = diff[1:]
		}
		e.sum.DiffPasses++
		if err := e.diffBuckets(batch); err != nil {
			return err
		}
	}
	return nil
}

// group is one identity (state, key, sub-key) and its values on each side.
type group struct {
	si       *stateInfo
	key, sub []byte
	bucket   uint32
	src, tgt [][]byte
}

// diffBuckets compares the entries of some target buckets exactly: the
// TARGET entries stored there (plus misplaced ones that belong there), and
// every SOURCE entry whose key hashes there.
func (e *equaler) diffBuckets(batch []uint32) error {
	want := map[uint32]bool{}
	for _, b := range batch {
		want[b] = true
	}
	groups := map[string]*group{}
	var idbuf []byte
	add := func(si *stateInfo, key, sub, value []byte, b uint32, fromSource bool) {
		idbuf = appendIdentity(idbuf[:0], si, key, sub)
		g := groups[string(idbuf)]
		if g == nil {
			g = &group{si: si, key: bytes.Clone(key), sub: bytes.Clone(sub), bucket: b}
			groups[string(idbuf)] = g
		}
		if fromSource {
			g.src = append(g.src, bytes.Clone(value))
		} else {
			g.tgt = append(g.tgt, bytes.Clone(value))
		}
	}
	// SOURCE: the files that can hold keys of these buckets, read in
	// parallel; entries are gathered per goroutine and merged here.
	type srcEntry struct {
		b          uint32
		key, value []byte
	}
	files := e.sourceFiles(batch)
	var mu sync.Mutex
	var gathered []srcEntry
	err := forEachFile(e.ctx, e.src, files, e.opts.Parallelism, func(key, value []byte) error {
		dk, err := snapshotfmt.DecodeKey(key)
		if err != nil {
			return err
		}
		b := e.layout.Bucket(dk.Key)
		if !want[b] {
			return nil
		}
		mu.Lock()
		gathered = append(gathered, srcEntry{b, bytes.Clone(key), bytes.Clone(value)})
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for _, se := range gathered {
		dk, _ := snapshotfmt.DecodeKey(se.key)
		si := e.sstates[dk.State]
		if si == nil {
			return fmt.Errorf("%w: source key %x: unknown state id %d", snapshotfmt.ErrCorrupt, se.key, dk.State)
		}
		add(si, dk.Key, dk.SubKey, se.value, se.b, true)
	}
	gathered = nil
	// TARGET: each bucket's own entries, skipping the misplaced ones (they
	// are counted in the bucket their key hashes to).
	for _, b := range batch {
		it := e.tgt.NewIter(e.ctx, b, b)
		for it.Next() {
			dk, err := snapshotfmt.DecodeKey(it.Key())
			if err != nil {
				it.Close()
				return fmt.Errorf("target: %w", err)
			}
			if e.layout.Bucket(dk.Key) != b {
				continue
			}
			add(e.tstates[dk.State], dk.Key, dk.SubKey, it.Value(), b, false)
		}
		err := it.Err()
		it.Close()
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
	}
	for _, mc := range e.misplaced {
		if want[mc.bucket] {
			dk, _ := snapshotfmt.DecodeKey(mc.key)
			add(e.tstates[dk.State], dk.Key, dk.SubKey, mc.value, mc.bucket, false)
		}
	}
	ids := make([]string, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e.compareGroup(groups[id])
	}
	return nil
}

func (e *equaler) compareGroup(g *group) {
	// Remove the values both sides share (as multisets).
	sort.Slice(g.src, func(i, j int) bool { return bytes.Compare(g.src[i], g.src[j]) < 0 })
	sort.Slice(g.tgt, func(i, j int) bool { return bytes.Compare(g.tgt[i], g.tgt[j]) < 0 })
	var onlyS, onlyT [][]byte
	i, j := 0, 0
	for i < len(g.src) || j < len(g.tgt) {
		switch {
		case j == len(g.tgt) || (i < len(g.src) && bytes.Compare(g.src[i], g.tgt[j]) < 0):
			onlyS = append(onlyS, g.src[i])
			i++
		case i == len(g.src) || bytes.Compare(g.src[i], g.tgt[j]) > 0:
			onlyT = append(onlyT, g.tgt[j])
			j++
		default:
			i++
			j++
		}
	}
	switch {
	case len(onlyS) == 0 && len(onlyT) == 0:
	case len(onlyS) == 1 && len(onlyT) == 1 && len(g.src) == 1 && len(g.tgt) == 1:
		e.emitCapped(e.entryFinding(Changed, g.si, g.key, g.sub, g.bucket,
			"value differs: TARGET %s, SOURCE %s", preview(onlyT[0]), preview(onlyS[0])))
	default:
		for _, v := range onlyS {
			e.emitCapped(e.entryFinding(Missing, g.si, g.key, g.sub, g.bucket,
				"in SOURCE only (value %s; SOURCE has %d value(s) for it, TARGET %d)", preview(v), len(g.src), len(g.tgt)))
		}
		for _, v := range onlyT {
			e.emitCapped(e.entryFinding(Extra, g.si, g.key, g.sub, g.bucket,
				"in TARGET only (value %s; TARGET has %d value(s) for it, SOURCE %d)", preview(v), len(g.tgt), len(g.src)))
		}
	}
}

// preview shows a value briefly: hex of at most 24 bytes and its length.
func preview(v []byte) string {
	if len(v) <= 24 {
		return fmt.Sprintf("%x (%d bytes)", v, len(v))
	}
	return fmt.Sprintf("%x... (%d bytes)", v[:24], len(v))
}

// sourceFiles lists the SOURCE files that can hold keys of the target
// buckets: under range->range only the source buckets whose hash ranges
// overlap them; otherwise every file.
func (e *equaler) sourceFiles(batch []uint32) []snapshotfmt.DataFile {
	sp := e.src.Manifest().Partitioning
	if sp.Mapping != snapshotfmt.MappingRange || e.layout.Mapping != snapshotfmt.MappingRange {
		return e.src.Manifest().Files
	}
	seen := map[string]bool{}
	var out []snapshotfmt.DataFile
	for _, b := range batch {
		lo, hi := hashRange(b, e.layout.Buckets)
		for _, f := range e.src.FilesIn(sp.BucketOfHash(lo), sp.BucketOfHash(hi)) {
			if !seen[f.Path] {
				seen[f.Path] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// hashRange is the inclusive range of hashes that bucket b of n holds
// under the range mapping: [ceil(b*2^64/n), ceil((b+1)*2^64/n) - 1].
func hashRange(b, n uint32) (lo, hi uint64) {
	ceil := func(x uint32) (uint64, bool) { // ceil(x*2^64/n); false when it is 2^64
		if x >= n {
			return 0, false
		}
		q, r := bits.Div64(uint64(x), 0, uint64(n))
		if r > 0 {
			q++
		}
		return q, true
	}
	lo, _ = ceil(b)
	next, ok := ceil(b + 1)
	if !ok {
		return lo, ^uint64(0)
	}
	return lo, next - 1
}

// forEachFile reads files of s in parallel, calling fn (from several
// goroutines) for every entry.
func forEachFile(ctx context.Context, s *reader.Snapshot, files []snapshotfmt.DataFile, par int, fn func(key, value []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan snapshotfmt.DataFile)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for df := range ch {
				err := func() error {
					fi, err := s.OpenFile(ctx, df, nil, nil)
					if err != nil {
						return err
					}
					defer fi.Close()
					for fi.Next() {
						if err := fn(fi.Key(), fi.Value()); err != nil {
							return fmt.Errorf("%s: %w", df.Path, err)
						}
					}
					return fi.Err()
				}()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", s.Dir(), err)
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for _, df := range files {
		if ctx.Err() != nil {
			break
		}
		ch <- df
	}
	close(ch)
	wg.Wait()
	if firstErr != nil && !errors.Is(firstErr, context.Canceled) {
		return firstErr
	}
	return ctx.Err()
}
