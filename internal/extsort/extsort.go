// Package extsort sorts key/value entries by key with bounded memory: it
// buffers entries up to a budget, spills sorted runs to a temporary
// directory, and merges the runs (and the last in-memory run) in one
// streaming pass. Equal keys come out in insertion order, so a caller can
// keep the first or the last of duplicates.
//
// The rewrite's shuffle and the dataset import share it.
package extsort

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/rebucket/rebucket/internal/fsx"
)

// Options tune a Sorter. The zero value works (64 MiB, the system temp dir).
type Options struct {
	// Memory bounds the bytes held for buffered entries and merge buffers.
	Memory int64
	// TmpDir is where the spill directory is created.
	TmpDir string
	// MaxFanIn bounds how many runs one merge pass reads at once
	// (default 64); more runs are merged in several passes.
	MaxFanIn int
	// FS is where spill files go (default the real filesystem; tests
	// inject faults through it).
	FS fsx.FS
}

// SpillPrefix starts the name of every spill directory; the rest is the
// process id and a random suffix (fsx.TempName). The directory holds a lock
// for its run's life (fsx.MkdirRun), so a later run removes the spill of a
// run that was killed, and never that of a live one, even in another PID
// namespace.
const SpillPrefix = ".rebucket-spill-"

// RemoveStale removes the spill directories in dir left by processes that
// are gone (a run killed before it could clean up) and returns them.
func RemoveStale(fs fsx.FS, dir string) []string {
	if dir == "" {
		dir = os.TempDir()
	}
	return fsx.RemoveStale(fs, dir, SpillPrefix)
}

// MkdirSpill creates a spill directory in dir (the system temp directory
// if empty), locked and named so that RemoveStale can clean it up after a
// crash. Remove it with its Remove.
func MkdirSpill(fs fsx.FS, dir string) (*fsx.RunDir, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	d, err := fsx.MkdirRun(fs, dir, SpillPrefix, 0o700)
	if err != nil {
		return nil, fmt.Errorf("create spill directory: %w", err)
	}
	return d, nil
}

const (
	defaultMemory = 64 << 20
	entryOverhead = 24 // one entry record in the index
	minReadBuf    = 32 << 10
	maxReadBuf    = 1 << 20
)

// Stats describe what a Sorter did.
type Stats struct {
	Entries    uint64 `json:"entries"`
	Runs       int    `json:"spilled_runs"`
	SpillBytes int64  `json:"spill_bytes"`
	PeakMemory int64  `json:"peak_memory"`
}

// Sorter collects entries and yields them sorted.
type Sorter struct {
	opts      Options
	chunkSize int
	chunks    [][]byte
	index     []entry
	// used counts the buffered entries (data plus index records) against
	// the budget; allocated is what the buffers really hold, reported as
	// peak memory (at most one chunk and the index slack above used).
	used      int64
	allocated int64
	dir       string
	spillDir  *fsx.RunDir
	runs      []string
	merged    int
	stats     Stats
	finished  bool
}

type entry struct {
	chunk, off, klen, vlen uint32
	pfx                    uint64 // prefix8 of the key
}

// New returns an empty Sorter. It removes the spill directories of dead
// runs in TmpDir, so a run killed mid-sort leaves nothing for long.
func New(opts Options) *Sorter {
	opts.FS = fsx.Or(opts.FS)
	if opts.TmpDir != "" {
		RemoveStale(opts.FS, opts.TmpDir)
	}
	if opts.Memory <= 0 {
		opts.Memory = defaultMemory
	}
	if opts.MaxFanIn < 2 {
		opts.MaxFanIn = 64
	}
	cs := opts.Memory / 16
	cs = max(64<<10, min(cs, 64<<20))
	return &Sorter{opts: opts, chunkSize: int(cs)}
}

// Stats reports counts so far.
func (s *Sorter) Stats() Stats { return s.stats }

// Add buffers a copy of one entry, spilling a sorted run when the budget
// is reached.
func (s *Sorter) Add(key, value []byte) error {
	if s.finished {
		return errors.New("extsort: Add after Finish")
	}
	n := len(key) + len(value)
	if uint64(len(key)) > 1<<31 || uint64(len(value)) > 1<<31 {
		return fmt.Errorf("extsort: entry of %d bytes is too large", n)
	}
	if len(s.index) > 0 && s.used+int64(n)+entryOverhead > s.opts.Memory {
		if err := s.spill(); err != nil {
			return err
		}
	}
	c := len(s.chunks) - 1
	if c < 0 || len(s.chunks[c])+n > cap(s.chunks[c]) {
		size := max(s.chunkSize, n)
		s.chunks = append(s.chunks, make([]byte, 0, size))
		s.allocated += int64(size)
		c++
	}
	off := len(s.chunks[c])
	s.chunks[c] = append(append(s.chunks[c], key...), value...)
	if len(s.index) == cap(s.index) {
		// Grow the index ourselves so its memory is counted.
		grown := make([]entry, len(s.index), max(1024, 2*cap(s.index)))
		copy(grown, s.index)
		s.allocated += int64(cap(grown)-cap(s.index)) * entryOverhead
		s.index = grown
	}
	s.index = append(s.index, entry{chunk: uint32(c), off: uint32(off), klen: uint32(len(key)), vlen: uint32(len(value)), pfx: prefix8(key)})
	s.used += int64(n) + entryOverhead
	s.stats.Entries++
	s.stats.PeakMemory = max(s.stats.PeakMemory, s.allocated)
	return nil
}

func (s *Sorter) key(e entry) []byte {
	return s.chunks[e.chunk][e.off : e.off+e.klen]
}

func (s *Sorter) value(e entry) []byte {
	return s.chunks[e.chunk][e.off+e.klen : e.off+e.klen+e.vlen]
}

// sortIndex sorts the buffered entries by key, equal keys in insertion
// order. Entries were added in (chunk, offset) order, so an unstable sort
// with that as the tie-break is stable (several times faster than
// slices.SortStableFunc). Comparisons use the 8-byte key prefix held in
// the entry, so they never touch the keys' memory (a cache miss each on a
// large buffer); groups that share the prefix are sorted again on the next
// 8 bytes, and so on (a multi-key radix-style refinement).
func (s *Sorter) sortIndex() { s.sortFrom(s.index, 0) }

// maxPrefixDepth bounds the refinement; deeper groups (long shared
// prefixes, duplicate keys) compare their keys directly.
const maxPrefixDepth = 64

// sortFrom sorts idx, whose keys share bytes [0, depth) and whose pfx
// fields hold bytes [depth, depth+8), zero-padded.
func (s *Sorter) sortFrom(idx []entry, depth uint32) {
	if depth >= maxPrefixDepth {
		slices.SortFunc(idx, func(a, b entry) int {
			if c := bytes.Compare(s.key(a)[depth:], s.key(b)[depth:]); c != 0 {
				return c
			}
			return cmp.Or(cmp.Compare(a.chunk, b.chunk), cmp.Compare(a.off, b.off))
		})
		return
	}
	// rest orders keys that end inside the window: with equal padded
	// prefixes, the one with fewer bytes left is a prefix of the other.
	rest := func(e entry) uint32 { return min(e.klen-depth, 9) }
	// No insertion-order tie-break here: groups of equal prefixes are
	// sorted again anyway, and pdqsort passes over runs of equal elements
	// in linear time.
	radixPrefix(idx, 0, rest)
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j].pfx == idx[i].pfx && rest(idx[j]) == rest(idx[i]) {
			j++
		}
		// Keys longer than the window with equal prefixes: refine. Shorter
		// ones are equal keys: put them in insertion order.
		if grp := idx[i:j]; len(grp) > 1 {
			if rest(grp[0]) < 9 {
				slices.SortFunc(grp, func(a, b entry) int { return cmp.Or(cmp.Compare(a.chunk, b.chunk), cmp.Compare(a.off, b.off)) })
			} else {
				for k := range grp {
					grp[k].pfx = prefix8(s.key(grp[k])[depth+8:])
				}
				s.sortFrom(grp, depth+8)
			}
		}
		i = j
	}
}

// radixMin is the smallest group radixPrefix splits by a byte; smaller
// ones are compared.
const radixMin = 256

// radixPrefix orders idx by (pfx, rest), not stably (sortFrom does not
// need it): an in-place most-significant-byte radix sort (American flag
// sort) from byte b of pfx, skipping bytes all entries share. For encoded
// snapshot keys most of the first 8 bytes are shared (state ids, key
// lengths), where a comparison sort pays log n comparisons per entry.
func radixPrefix(idx []entry, b uint, rest func(entry) uint32) {
	for len(idx) >= radixMin && b < 8 {
		shift := 56 - 8*b
		var count [256]int
		for _, e := range idx {
			count[byte(e.pfx>>shift)]++
		}
		if count[byte(idx[0].pfx>>shift)] == len(idx) {
			b++ // every entry has this byte: on to the next
			continue
		}
		var next, end [256]int
		sum := 0
		for d, c := range count {
			next[d] = sum
			sum += c
			end[d] = sum
		}
		for d := range 256 {
			for next[d] < end[d] {
				e := idx[next[d]]
				for x := int(byte(e.pfx >> shift)); x != d; x = int(byte(e.pfx >> shift)) {
					e, idx[next[x]] = idx[next[x]], e
					next[x]++
				}
				idx[next[d]] = e
				next[d]++
			}
		}
		lo := 0
		for d := range 256 {
			if hi := end[d]; hi-lo > 1 {
				radixPrefix(idx[lo:hi], b+1, rest)
			}
			lo = end[d]
		}
		return
	}
	slices.SortFunc(idx, func(a, b entry) int {
		if a.pfx != b.pfx {
			return cmp.Compare(a.pfx, b.pfx)
		}
		return cmp.Compare(rest(a), rest(b))
	})
}

// prefix8 is the first 8 bytes of key, big-endian, zero-padded.
func prefix8(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// prefetchAhead is how many entries ahead of the one being read in sorted
// order touch loads the next key. After the sort, consecutive entries sit
// anywhere in hundreds of MiB of chunks: each first read is a cache miss,
// and the per-entry work between them (an SSTable Add) is too long for the
// CPU to overlap them by itself.
const prefetchAhead = 16

// touch prefetches the key of sorted entry i (if any), so it is in cache
// by the time it is read. (A plain load would not do: the CPU retires in
// order, so a missing load stalls it as much as the read it anticipates.)
func (s *Sorter) touch(i int) {
	if i < len(s.index) {
		e := s.index[i]
		if c := s.chunks[e.chunk]; int(e.off) < len(c) {
			prefetch(&c[e.off])
		}
	}
}

// spill writes the buffered entries as one sorted run and frees them.
func (s *Sorter) spill() error {
	if s.dir == "" {
		d, err := MkdirSpill(s.opts.FS, s.opts.TmpDir)
		if err != nil {
			return err
		}
		s.spillDir, s.dir = d, d.Path
	}
	s.sortIndex()
	p := filepath.Join(s.dir, fmt.Sprintf("run-%06d", len(s.runs)))
	n, err := writeRun(s.opts.FS, p, len(s.index), func(i int) ([]byte, []byte) {
		e := s.index[i]
		s.touch(i + prefetchAhead)
		return s.key(e), s.value(e)
	})
	if err != nil {
		return err
	}
	s.runs = append(s.runs, p)
	s.stats.Runs++
	s.stats.SpillBytes += n
	// Keep one chunk and the index for reuse; drop the rest.
	for _, c := range s.chunks[1:] {
		s.allocated -= int64(cap(c))
	}
	clear(s.chunks[1:])
	s.chunks = s.chunks[:1]
	s.chunks[0] = s.chunks[0][:0]
	s.index = s.index[:0]
	s.used = 0
	return nil
}

// writeRun writes n entries as [uvarint klen][uvarint vlen][key][value].
func writeRun(fs fsx.FS, p string, n int, at func(int) ([]byte, []byte)) (int64, error) {
	f, err := fsx.Create(fs, p, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create spill file: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr [2 * binary.MaxVarintLen64]byte
	var total int64
	for i := 0; i < n; i++ {
		k, v := at(i)
		h := binary.AppendUvarint(hdr[:0], uint64(len(k)))
		h = binary.AppendUvarint(h, uint64(len(v)))
		w.Write(h)
		w.Write(k)
		w.Write(v)
		total += int64(len(h) + len(k) + len(v))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, fmt.Errorf("write spill file %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write spill file %s: %w", p, err)
	}
	return total, nil
}

// Finish sorts what is buffered and returns an iterator over all entries
// in key order. The Sorter must still be closed (Close removes the spill
// files), after the iterator is done.
func (s *Sorter) Finish(ctx context.Context) (*Iterator, error) {
	if s.finished {
		return nil, errors.New("extsort: Finish called twice")
	}
	s.finished = true
	s.sortIndex()
	// Reduce the runs to at most MaxFanIn-1 so the final merge (with the
	// in-memory run) stays within the fan-in.
	for len(s.runs) > s.opts.MaxFanIn-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.mergePass(ctx); err != nil {
			return nil, err
		}
	}
	it := &Iterator{ctx: ctx}
	bufSize := s.readBufSize(len(s.runs))
	for i, p := range s.runs {
		src, err := openRun(s.opts.FS, p, i, bufSize)
		if err != nil {
			it.Close()
			return nil, err
		}
		it.add(src)
	}
	if len(s.index) > 0 {
		it.add(&memSource{s: s, order: len(s.runs)})
	}
	return it, nil
}

// readBufSize spreads what the budget leaves over the runs being read.
func (s *Sorter) readBufSize(runs int) int {
	if runs == 0 {
		return minReadBuf
	}
	free := s.opts.Memory - s.allocated
	b := free / int64(runs)
	return int(max(minReadBuf, min(b, maxReadBuf)))
}

// mergePass merges consecutive groups of MaxFanIn runs into one run each,
// in place, so the runs stay in insertion order (stability) and every
// entry is rewritten once per pass: log_k(runs) passes in all.
func (s *Sorter) mergePass(ctx context.Context) error {
	k := s.opts.MaxFanIn
	var next []string
	for lo := 0; lo < len(s.runs); lo += k {
		group := s.runs[lo:min(lo+k, len(s.runs))]
		if len(group) == 1 {
			next = append(next, group[0])
			continue
		}
		out, err := s.mergeGroup(ctx, group)
		if err != nil {
			return err
		}
		next = append(next, out)
	}
	s.runs = next
	return nil
}

func (s *Sorter) mergeGroup(ctx context.Context, group []string) (string, error) {
	it := &Iterator{ctx: ctx}
	bufSize := s.readBufSize(len(group))
	for i, p := range group {
		src, err := openRun(s.opts.FS, p, i, bufSize)
		if err != nil {
			it.Close()
			return "", err
		}
		it.add(src)
	}
	s.merged++
	out := filepath.Join(s.dir, fmt.Sprintf("merged-%06d", s.merged))
	f, err := fsx.Create(s.opts.FS, out, 0o600)
	if err != nil {
		it.Close()
		return "", fmt.Errorf("create spill file: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr [2 * binary.MaxVarintLen64]byte
	var n int64
	for it.Next() {
		k, v := it.Key(), it.Value()
		h := binary.AppendUvarint(hdr[:0], uint64(len(k)))
		h = binary.AppendUvarint(h, uint64(len(v)))
		w.Write(h)
		w.Write(k)
		w.Write(v)
		n += int64(len(h) + len(k) + len(v))
	}
	err = it.Err()
	it.Close()
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.opts.FS.Remove(out)
		return "", fmt.Errorf("merge spill runs: %w", err)
	}
	for _, p := range group {
		s.opts.FS.Remove(p)
	}
	s.stats.SpillBytes += n
	return out, nil
}

// Close removes the spill files and frees memory. Safe to call twice.
func (s *Sorter) Close() error {
	s.chunks, s.index = nil, nil
	if s.dir != "" {
		err := s.spillDir.Remove()
		s.dir, s.spillDir = "", nil
		if err != nil {
			return fmt.Errorf("remove spill directory: %w", err)
		}
	}
	return nil
}

// SpillDir is the directory holding spilled runs ("" before the first
// spill), for tests and reports.
func (s *Sorter) SpillDir() string { return s.dir }

// source is one sorted input of a merge.
type source interface {
	next() (bool, error)
	key() []byte
	value() []byte
	close()
	// rank orders sources holding equal keys: lower ranks were added
	// earlier, so they come first.
	rank() int
}

type memSource struct {
	s     *Sorter
	i     int
	order int
	e     entry
}

func (m *memSource) next() (bool, error) {
	if m.i >= len(m.s.index) {
		return false, nil
	}
	m.e = m.s.index[m.i]
	m.s.touch(m.i + prefetchAhead)
	m.i++
	return true, nil
}
func (m *memSource) key() []byte   { return m.s.key(m.e) }
func (m *memSource) value() []byte { return m.s.value(m.e) }
func (m *memSource) close()        {}
func (m *memSource) rank() int     { return m.order }

type runSource struct {
	f     fsx.File
	r     *bufio.Reader
	buf   []byte
	k, v  []byte
	skip  int // bytes of the current entry still in r's buffer
	order int
	path  string
}

func openRun(fs fsx.FS, p string, order, bufSize int) (*runSource, error) {
	f, err := fsx.Or(fs).Open(p)
	if err != nil {
		return nil, fmt.Errorf("open spill file: %w", err)
	}
	return &runSource{f: f, r: bufio.NewReaderSize(f, bufSize), order: order, path: p}, nil
}

func (r *runSource) next() (bool, error) {
	// The previous entry was read in place (see below): drop it now that
	// the caller is done with it.
	if r.skip > 0 {
		r.r.Discard(r.skip)
		r.skip = 0
	}
	kl, vl, hl, err := r.header()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read spill file %s: %w", r.path, err)
	}
	if kl > 1<<31 || vl > 1<<31 {
		return false, fmt.Errorf("spill file %s is damaged: entry of %d+%d bytes", r.path, kl, vl)
	}
	n := int(kl + vl)
	// An entry that fits the read buffer is used where it lies, without a
	// copy; it stays valid until the next call.
	if hl+n <= r.r.Size() {
		b, err := r.r.Peek(hl + n)
		if err != nil {
			return false, fmt.Errorf("read spill file %s: %w", r.path, noEOF(err))
		}
		b = b[hl:]
		r.k, r.v = b[:kl:kl], b[kl:n:n]
		r.skip = hl + n
		return true, nil
	}
	r.r.Discard(hl)
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		return false, fmt.Errorf("read spill file %s: %w", r.path, noEOF(err))
	}
	r.k, r.v = r.buf[:kl], r.buf[kl:]
	return true, nil
}

// header decodes the two lengths at the read position without consuming
// them; hl is their size. io.EOF means a clean end of the run.
func (r *runSource) header() (kl, vl uint64, hl int, err error) {
	b, perr := r.r.Peek(2 * binary.MaxVarintLen64)
	if len(b) == 0 {
		if perr == nil || perr == io.EOF {
			return 0, 0, 0, io.EOF
		}
		return 0, 0, 0, perr
	}
	kl, a := binary.Uvarint(b)
	if a <= 0 {
		return 0, 0, 0, truncatedOr(perr)
	}
	vl, c := binary.Uvarint(b[a:])
	if c <= 0 {
		return 0, 0, 0, truncatedOr(perr)
	}
	return kl, vl, a + c, nil
}

// truncatedOr is the error of a length cut short: the read error if there
// was one, else a truncated run.
func truncatedOr(err error) error {
	if err != nil && err != io.EOF {
		return err
	}
	return io.ErrUnexpectedEOF
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (r *runSource) key() []byte   { return r.k }
func (r *runSource) value() []byte { return r.v }
func (r *runSource) close()        { r.f.Close() }
func (r *runSource) rank() int     { return r.order }

// Iterator yields entries in key order; equal keys in insertion order.
type Iterator struct {
	ctx     context.Context
	h       srcHeap
	pending []source // sources not yet primed
	cur     source
	err     error
	n       uint64
}

func (it *Iterator) add(s source) { it.pending = append(it.pending, s) }

// Next advances; it returns false at the end or on error.
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.pending != nil {
		for _, s := range it.pending {
			ok, err := s.next()
			if err != nil {
				it.err = err
				return false
			}
			if ok {
				it.h = append(it.h, s)
			} else {
				s.close()
			}
		}
		it.pending = nil
		heap.Init(&it.h)
	} else if it.cur != nil {
		ok, err := it.cur.next()
		if err != nil {
			it.err = err
			return false
		}
		if ok {
			heap.Fix(&it.h, 0)
		} else {
			heap.Pop(&it.h).(source).close()
		}
	}
	if len(it.h) == 0 {
		it.cur = nil
		return false
	}
	it.n++
	if it.n&0xffff == 0 && it.ctx != nil {
		if err := it.ctx.Err(); err != nil {
			it.err = err
			return false
		}
	}
	it.cur = it.h[0]
	return true
}

// Key is the current key, valid until Next.
func (it *Iterator) Key() []byte { return it.cur.key() }

// Value is the current value, valid until Next.
func (it *Iterator) Value() []byte { return it.cur.value() }

// Err is the error that ended iteration.
func (it *Iterator) Err() error { return it.err }

// Close releases the run files (the Sorter's Close removes them).
func (it *Iterator) Close() error {
	for _, s := range it.h {
		s.close()
	}
	for _, s := range it.pending {
		s.close()
	}
	it.h, it.pending, it.cur = nil, nil, nil
	return nil
}

type srcHeap []source

func (h srcHeap) Len() int { return len(h) }
func (h srcHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key(), h[j].key()); c != 0 {
		return c < 0
	}
	return h[i].rank() < h[j].rank()
}
func (h srcHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *srcHeap) Push(x any)   { *h = append(*h, x.(source)) }
func (h *srcHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
