package rewrite

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// source is the snapshot being read. A data file may be opened by several
// tasks (one per bucket range it holds); its whole-file checksum is checked
// once, by the first, and the others open it without hashing it again.
type source struct {
	checked *reader.Snapshot
	fast    *reader.Snapshot
	m       *snapshotfmt.Manifest
	part    snapshotfmt.Partitioning
	// keep[id] is true for the state ids that are carried (known, not
	// dropped); known[id] for every id of the states table.
	keep, known [1 << 16]bool
	// noSub[id] is true for the states that have no sub-key (value, list).
	noSub [1 << 16]bool

	mu       sync.Mutex
	verified map[string]*onceErr
	// counted[b] is the number of entries found in old bucket b, over the
	// spans claimed for counting (the first reader of each span: tasks
	// may read a bucket more than once); checkCounts compares it with the
	// manifest once every span has been read.
	counted []atomic.Uint64
	claimed map[spanID]bool

	prog    progress.Reporter
	dropped atomic.Uint64
}

type onceErr struct {
	once sync.Once
	err  error
}

func newSource(s *reader.Snapshot, dir string, prog progress.Reporter) (*source, error) {
	fast, err := reader.Open(dir, reader.Options{SkipChecksums: true})
	if err != nil {
		return nil, err
	}
	src := &source{checked: s, fast: fast, m: s.Manifest(), part: s.Manifest().Partitioning,
		verified: map[string]*onceErr{}, prog: progress.OrNop(prog),
		counted: make([]atomic.Uint64, s.Manifest().Partitioning.Buckets), claimed: map[spanID]bool{}}
	for _, st := range src.m.States {
		src.known[st.ID] = true
		src.keep[st.ID] = true
		src.noSub[st.ID] = st.Kind != snapshotfmt.KindMap
	}
	return src, nil
}

// spanID names the part of a file a span reads, for counting each part
// once.
type spanID struct {
	path   string
	lo, hi uint32
}

// claim reports whether the caller is the first to read this part of the
// file, and so counts its entries.
func (s *source) claim(sp span) bool {
	lo, hi := sp.bounds()
	id := spanID{sp.df.Path, lo, hi}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed[id] {
		return false
	}
	s.claimed[id] = true
	return true
}

// checkCounts compares the entries found in each bucket with the
// manifest's count, once every bucket has been read in full: a data file
// holding fewer or more entries than its manifest says (within its
// declared range, so no single entry looked wrong) is damage, reported
// here as such rather than as an output that lost entries.
func (s *source) checkCounts() error {
	for b := range s.counted {
		if got, want := s.counted[b].Load(), s.m.BucketEntries[b]; got != want {
			var files []string
			for _, df := range s.checked.FilesIn(uint32(b), uint32(b)) {
				files = append(files, df.Path)
			}
			return fmt.Errorf("%w: bucket %d holds %d entries in %v, the manifest says %d: the manifest and the data disagree (run verify)", snapshotfmt.ErrCorrupt, b, got, files, want)
		}
	}
	return nil
}

func (s *source) verify(df snapshotfmt.DataFile) error {
	s.mu.Lock()
	v := s.verified[df.Path]
	if v == nil {
		v = &onceErr{}
		s.verified[df.Path] = v
	}
	s.mu.Unlock()
	v.once.Do(func() {
		f, err := s.checked.OpenListed(df.Path, df.Size, df.Checksum)
		if err == nil {
			f.Close()
		}
		v.err = err
	})
	return v.err
}

// span is a piece of the source to read: the entries of one file, within
// optional bucket bounds.
type span struct {
	df     snapshotfmt.DataFile
	lo, hi uint32
	whole  bool
}

// bounds are the buckets of the file the span reads.
func (sp span) bounds() (uint32, uint32) {
	if sp.whole {
		return sp.df.BucketLo, sp.df.BucketHi
	}
	return max(sp.lo, sp.df.BucketLo), min(sp.hi, sp.df.BucketHi)
}

// spansOf lists the files holding old buckets lo..hi.
func (s *source) spansOf(lo, hi uint32) []span {
	var out []span
	for _, df := range s.checked.FilesIn(lo, hi) {
		out = append(out, span{df: df, lo: lo, hi: hi, whole: df.BucketLo >= lo && df.BucketHi <= hi})
	}
	return out
}

// stream iterates the entries of spans in key order, checking each entry
// against the source's partitioning and skipping dropped states. Hash is
// the key hash of the current entry.
type stream struct {
	ctx   context.Context
	src   *source
	spans []span
	cur   *reader.FileIter
	key   []byte
	val   []byte
	hash  uint64
	err   error
	// unreported counts logical bytes read since the last progress report.
	unreported int64
	n          uint64
	// lo, hi are the buckets the current span may hold; counting whether
	// it counts its entries into src.counted.
	lo, hi   uint32
	counting bool
	// cntBucket, cntN: entries of one bucket counted but not yet added
	// to src.counted (entries come bucket by bucket: one atomic add per
	// bucket, not per entry).
	cntBucket uint32
	cntN      uint64
}

func (st *stream) flushCount() {
	if st.cntN > 0 {
		st.src.counted[st.cntBucket].Add(st.cntN)
		st.cntN = 0
	}
}

func (s *source) newStream(ctx context.Context, spans []span) *stream {
	return &stream{ctx: ctx, src: s, spans: spans}
}

func (st *stream) Next() bool {
	for st.err == nil {
		if st.cur != nil {
			if !st.cur.Next() {
				st.flushCount()
				st.err = st.cur.Err()
				if err := st.cur.Close(); err != nil && st.err == nil {
					st.err = fmt.Errorf("close %s: %w", st.cur.File().Path, err)
				}
				st.cur = nil
				continue
			}
			// Flush before counting this entry, so that uncount always
			// finds it still unreported.
			if st.unreported >= 1<<20 {
				st.src.prog.Add(st.unreported)
				st.unreported = 0
			}
			k, v := st.cur.Key(), st.cur.Value()
			st.unreported += int64(len(k) + len(v))
			dk, err := snapshotfmt.DecodeKey(k)
			if err != nil {
				st.err = fmt.Errorf("%s: %w", st.cur.File().Path, err)
				return false
			}
			// The span's edges at the file's edges are read without
			// bounds, so entries outside the file's declared range are
			// seen, not cut off by the table iterator: a file holding
			// another's contents, or entries past its largest key, is
			// damage (issue 14, item 10).
			if dk.Bucket < st.lo || dk.Bucket > st.hi {
				df := st.cur.File()
				st.err = fmt.Errorf("%w: %s: an entry of bucket %d lies outside the file's declared buckets %d..%d (the file and the manifest disagree; run verify)", snapshotfmt.ErrCorrupt, df.Path, dk.Bucket, df.BucketLo, df.BucketHi)
				return false
			}
			if st.counting {
				if dk.Bucket != st.cntBucket {
					st.flushCount()
					st.cntBucket = dk.Bucket
				}
				st.cntN++
			}
			if st.src.known[dk.State] && st.src.noSub[dk.State] && len(dk.SubKey) > 0 {
				name := "?"
				if s, ok := st.src.m.StateByID(dk.State); ok {
					name = s.QualifiedName()
				}
				st.err = fmt.Errorf("%w: %s: an entry of state %s carries %d bytes after its key; only map state has sub-keys (run verify)", snapshotfmt.ErrCorrupt, st.cur.File().Path, name, len(dk.SubKey))
				return false
			}
			if !st.src.keep[dk.State] {
				if !st.src.known[dk.State] {
					st.err = fmt.Errorf("%w: %s: entry %x has state id %d, which is not in the states table", snapshotfmt.ErrCorrupt, st.cur.File().Path, k, dk.State)
					return false
				}
				st.src.dropped.Add(1)
				continue
			}
			// The reader hashed the key to check its placement.
			h, ok := st.cur.KeyHash()
			if !ok {
				h = snapshotfmt.HashKey(dk.Key)
			}
			if b := st.src.part.BucketOfHash(h); b != dk.Bucket {
				st.err = fmt.Errorf("%w: %s: key %q is stored in bucket %d but hashes to bucket %d under %s", snapshotfmt.ErrCorrupt, st.cur.File().Path, dk.Key, dk.Bucket, b, st.src.part)
				return false
			}
			st.key, st.val, st.hash = k, v, h
			st.n++
			if st.n&0xfff == 0 {
				if err := st.ctx.Err(); err != nil {
					st.err = err
					return false
				}
			}
			return true
		}
		if len(st.spans) == 0 {
			return false
		}
		if err := st.ctx.Err(); err != nil {
			st.err = err
			return false
		}
		sp := st.spans[0]
		st.spans = st.spans[1:]
		if err := st.src.verify(sp.df); err != nil {
			st.err = err
			return false
		}
		// Bounds only inside the file's declared range: at its edges the
		// whole file is read, so nothing outside the range goes unseen.
		var lower, upper []byte
		if !sp.whole && sp.lo > sp.df.BucketLo {
			lower = snapshotfmt.BucketPrefix(sp.lo)
		}
		if !sp.whole && sp.hi < sp.df.BucketHi {
			upper = snapshotfmt.BucketUpperBound(sp.hi)
		}
		st.lo, st.hi = sp.bounds()
		st.counting = st.src.claim(sp)
		fi, err := st.src.fast.OpenFile(st.ctx, sp.df, lower, upper)
		if err != nil {
			st.err = err
			return false
		}
		st.cur = fi
	}
	return false
}

func (st *stream) Err() error { return st.err }

func (st *stream) Close() {
	if st.unreported > 0 {
		st.src.prog.Add(st.unreported)
		st.unreported = 0
	}
	if st.cur != nil {
		st.cur.Close()
		st.cur = nil
	}
}

// entrySource is what a task reads: one stream, or a merge of several.
type entrySource interface {
	Next() bool
	Err() error
	Close()
	current() (key, val []byte, hash uint64)
	uncount()
}

func (st *stream) current() ([]byte, []byte, uint64) { return st.key, st.val, st.hash }

// uncount takes the current entry out of the progress count: it belongs to
// another task (a later pass, or a neighbour sharing the old bucket), which
// counts it, so progress ends at the source's logical size.
func (st *stream) uncount() { st.unreported -= int64(len(st.key) + len(st.val)) }

// merger merges streams of different old buckets by the encoded key after
// the bucket field (state, key, sub-key): once each entry's bucket is
// rewritten, that is the order of the new bucket. Two streams never hold
// the same key, since a key lives in one old bucket.
type merger struct {
	h       mergeHeap
	pending []*stream
	top     *stream
	err     error
}

func newMerger(streams []*stream) *merger { return &merger{pending: streams} }

func (m *merger) Next() bool {
	if m.err != nil {
		return false
	}
	if m.pending != nil {
		for _, s := range m.pending {
			if s.Next() {
				m.h = append(m.h, s)
			} else if err := s.Err(); err != nil {
				m.err = err // Close closes pending and heap alike
				return false
			} else {
				s.Close()
			}
		}
		m.pending = nil
		heap.Init(&m.h)
	} else if m.top != nil {
		if m.top.Next() {
			heap.Fix(&m.h, 0)
		} else {
			if err := m.top.Err(); err != nil {
				m.err = err
				return false
			}
			heap.Pop(&m.h)
		}
	}
	if len(m.h) == 0 {
		m.top = nil
		return false
	}
	m.top = m.h[0]
	return true
}

func (m *merger) current() ([]byte, []byte, uint64) { return m.top.current() }
func (m *merger) uncount()                          { m.top.uncount() }
func (m *merger) Err() error                        { return m.err }

func (m *merger) Close() {
	for _, s := range m.h {
		s.Close()
	}
	for _, s := range m.pending {
		s.Close()
	}
	m.h, m.pending = nil, nil
}

type mergeHeap []*stream

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	return bytes.Compare(h[i].key[4:], h[j].key[4:]) < 0
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	x.Close()
	*h = old[:len(old)-1]
	return x
}
