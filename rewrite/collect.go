package rewrite

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rebucket/rebucket/internal/extsort"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/writer"
)

// collector writes the new buckets that split, merge and grouped-shuffle
// tasks produce, each complete and sorted and from exactly one task, in
// bucket order through one writer per owner of a contiguous range of new
// buckets: files are cut by size (and at the cut widths), never one per
// bucket. A task that reaches its owner's next bucket writes straight into
// the owner's writer (a lease); a bucket that is not the next one waits as
// a run in memory until its turn, and past the memory budget runs wait on
// disk in the spill directory, so memory stays bounded whatever the order
// in which tasks finish.
type collector struct {
	w      *writer.Snapshot
	bounds []uint32 // owner o holds new buckets [bounds[o], bounds[o+1])
	owners []*owner
	budget int64
	held   atomic.Int64 // bytes of runs in memory
	spill  func() (string, error)

	spilledBytes atomic.Int64
	spilledRuns  atomic.Int64
}

type owner struct {
	mu     sync.Mutex
	next   uint32 // the bucket to write next
	end    uint32
	busy   bool // a lease or a drain is writing
	parked map[uint32]*bucketRun
	bw     *writer.BucketWriter
	err    error
	rbuf   []byte
}

// bucketRun holds one new bucket's entries, in order: spilled segments
// first, then chunks in memory. Each entry is its key length and value
// length (4 bytes each, big-endian), the key, the value; an entry never
// straddles two chunks.
type bucketRun struct {
	bucket uint32
	segs   []segment
	chunks [][]byte
}

// chunkSize is the size of the pooled chunks runs are held in: chunks,
// not one growing slab, so holding a run never copies it again.
const chunkSize = 256 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize); return &b }}

// getChunk returns an empty chunk with room for need bytes, the n-th of
// its run: a run's first chunks are small (a task may hold thousands of
// runs of a few entries each), later ones chunkSize and pooled.
func getChunk(need, n int) []byte {
	size := min(chunkSize, firstChunk<<min(n, 8))
	if need > size {
		if need > chunkSize {
			return make([]byte, 0, need)
		}
		size = chunkSize
	}
	if size < chunkSize {
		return make([]byte, 0, size)
	}
	return (*chunkPool.Get().(*[]byte))[:0]
}

// firstChunk is the size of a run's first chunk.
const firstChunk = 8 << 10

func putChunk(b []byte) {
	if cap(b) == chunkSize {
		b = b[:0]
		chunkPool.Put(&b)
	}
}

// release frees the run's chunks and spilled segments.
func (r *bucketRun) release(c *collector) {
	for _, ch := range r.chunks {
		c.held.Add(-int64(cap(ch)))
		putChunk(ch)
	}
	for _, s := range r.segs {
		s.f.release()
	}
	r.chunks, r.segs = nil, nil
}

type segment struct {
	f      *spillFile
	off, n int64
}

type spillFile struct {
	f    *os.File
	path string
	off  int64
	refs atomic.Int32
}

func (sf *spillFile) release() {
	if sf.refs.Add(-1) == 0 {
		sf.f.Close()
		os.Remove(sf.path)
	}
}

// testCollectorBudget, when not negative, replaces every collector's
// budget (the tests make runs spill with it).
var testCollectorBudget int64 = -1

func newCollector(w *writer.Snapshot, bounds []uint32, budget int64, spill func() (string, error)) *collector {
	if testCollectorBudget >= 0 {
		budget = testCollectorBudget
	}
	c := &collector{w: w, bounds: bounds, budget: budget, spill: spill}
	for o := 0; o+1 < len(bounds); o++ {
		c.owners = append(c.owners, &owner{next: bounds[o], end: bounds[o+1], parked: map[uint32]*bucketRun{}})
	}
	return c
}

func (c *collector) ownerOf(j uint32) *owner {
	lo, hi := 0, len(c.owners)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if c.bounds[mid] <= j {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return c.owners[lo]
}

// finish closes every owner's writer; each must have written its whole
// range.
func (c *collector) finish() error {
	var first error
	for _, o := range c.owners {
		if first == nil && o.err == nil && o.next != o.end {
			first = fmt.Errorf("internal error: new buckets %d..%d were never written", o.next, o.end-1)
		}
		if o.bw == nil {
			continue
		}
		if first != nil || o.err != nil {
			o.bw.Abort()
			if first == nil {
				first = o.err
			}
			continue
		}
		if err := o.bw.Close(); err != nil {
			first = err
		}
	}
	return first
}

// abort drops every owner's open file (the snapshot's Abort removes them).
func (c *collector) abort() {
	for _, o := range c.owners {
		if o.bw != nil {
			o.bw.Abort()
		}
	}
}

func (c *collector) writerOf(o *owner) *writer.BucketWriter {
	if o.bw == nil {
		o.bw = c.w.NewBucketWriter()
	}
	return o.bw
}

// out is one task's output: a sink per new bucket it owns.
type out struct {
	c     *collector
	runs  []*bucketRun
	lease []*owner // non-nil: this slot writes straight into the owner
	bytes int64    // bytes of this task's runs in memory
	sf    *spillFile
	hdr   [8]byte
}

// newOut begins a task owning the given new buckets, listed in the order
// of the slots the task adds by.
func (c *collector) newOut(buckets []uint32) *out {
	t := &out{c: c, runs: make([]*bucketRun, len(buckets)), lease: make([]*owner, len(buckets))}
	for i, j := range buckets {
		t.runs[i] = &bucketRun{bucket: j}
	}
	// A slot whose bucket its owner writes next takes the owner's lease,
	// and so never buffers (at most one slot per owner can).
	for i, j := range buckets {
		o := c.ownerOf(j)
		o.mu.Lock()
		if !o.busy && o.next == j && o.err == nil {
			o.busy = true
			t.lease[i] = o
		}
		o.mu.Unlock()
	}
	return t
}

// add appends one entry (key already in its new bucket) to slot i.
func (t *out) add(i int, key, val []byte) error {
	if o := t.lease[i]; o != nil {
		return t.c.writerOf(o).Add(key, val)
	}
	r := t.runs[i]
	need := 8 + len(key) + len(val)
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < need {
		// Before holding more, see whether the owner has reached this
		// bucket meanwhile (the task before it finished): then write
		// what is held and go on straight through.
		if ok, err := t.tryLease(i); ok || err != nil {
			if err != nil {
				return err
			}
			return t.c.writerOf(t.lease[i]).Add(key, val)
		}
		ch := getChunk(need, len(r.chunks)+len(r.segs))
		r.chunks = append(r.chunks, ch)
		last++
		t.bytes += int64(cap(ch))
		// Past the budget a task spills what it holds, in pieces of at
		// least spillChunk so that spill writes stay large.
		if t.c.held.Add(int64(cap(ch))) > t.c.budget && t.bytes >= spillChunk {
			if err := t.spillAll(); err != nil {
				return err
			}
			r.chunks = append(r.chunks, getChunk(need, len(r.segs)))
			t.bytes += int64(cap(r.chunks[0]))
			t.c.held.Add(int64(cap(r.chunks[0])))
			last = 0
		}
	}
	ch := r.chunks[last]
	binary.BigEndian.PutUint32(t.hdr[:4], uint32(len(key)))
	binary.BigEndian.PutUint32(t.hdr[4:], uint32(len(val)))
	r.chunks[last] = append(append(append(ch, t.hdr[:]...), key...), val...)
	return nil
}

// tryLease takes the lease of slot i's owner if the owner is free and
// writes this bucket next; what the slot holds is written first.
func (t *out) tryLease(i int) (bool, error) {
	r := t.runs[i]
	o := t.c.ownerOf(r.bucket)
	o.mu.Lock()
	ok := !o.busy && o.next == r.bucket && o.err == nil
	if ok {
		o.busy = true
	}
	o.mu.Unlock()
	if !ok {
		return false, nil
	}
	t.lease[i] = o
	held := int64(0)
	for _, ch := range r.chunks {
		held += int64(cap(ch))
	}
	err := t.c.writeRun(o, r)
	t.bytes -= held
	return true, err
}

// spillChunk is the least a task holds before it spills (a variable for
// the tests, which make every run spill).
var spillChunk int64 = 1 << 20

// readChunk is the piece of a spilled segment read back at once.
const readChunk = 1 << 20

// spillAll moves this task's runs in memory to its spill file.
func (t *out) spillAll() error {
	for _, r := range t.runs {
		if err := t.spillRun(r); err != nil {
			return err
		}
	}
	return nil
}

func (t *out) spillRun(r *bucketRun) error {
	if len(r.chunks) == 0 {
		return nil
	}
	if t.sf == nil {
		dir, err := t.c.spill()
		if err != nil {
			return err
		}
		f, err := os.CreateTemp(dir, "runs-*.bin")
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		t.sf = &spillFile{f: f, path: f.Name()}
		t.sf.refs.Store(1) // the task's own
		t.c.spilledRuns.Add(1)
	}
	start := t.sf.off
	for _, ch := range r.chunks {
		if _, err := t.sf.f.WriteAt(ch, t.sf.off); err != nil {
			return fmt.Errorf("spill to %s: %w", t.sf.path, err)
		}
		t.sf.off += int64(len(ch))
		t.c.held.Add(-int64(cap(ch)))
		t.bytes -= int64(cap(ch))
		putChunk(ch)
	}
	r.chunks = nil
	t.sf.refs.Add(1)
	r.segs = append(r.segs, segment{f: t.sf, off: start, n: t.sf.off - start})
	t.c.spilledBytes.Add(t.sf.off - start)
	return nil
}

// close hands every slot's bucket to its owner, which writes what is now
// in order. After an error the task's runs are dropped.
func (t *out) close() error {
	var first error
	if t.c.held.Load() > t.c.budget {
		first = t.spillAll()
	}
	for i, r := range t.runs {
		if first != nil {
			t.drop(r)
			if o := t.lease[i]; o != nil {
				t.c.releaseFailed(o, first)
			}
			continue
		}
		if o := t.lease[i]; o != nil {
			first = t.c.release(o, r.bucket)
			continue
		}
		first = t.c.deliver(r)
	}
	if t.sf != nil {
		t.sf.release()
	}
	return first
}

// abort drops the task's output after a failure elsewhere.
func (t *out) abort(err error) {
	for i, r := range t.runs {
		t.drop(r)
		if o := t.lease[i]; o != nil {
			t.c.releaseFailed(o, err)
		}
	}
	if t.sf != nil {
		t.sf.release()
	}
}

func (t *out) drop(r *bucketRun) { r.release(t.c) }

func (c *collector) releaseFailed(o *owner, err error) {
	o.mu.Lock()
	o.busy = false
	if o.err == nil {
		o.err = err
	}
	o.mu.Unlock()
}

// release ends a lease on bucket j and writes what waited behind it.
func (c *collector) release(o *owner, j uint32) error {
	o.mu.Lock()
	o.next = j + 1
	return c.drainLocked(o)
}

// deliver parks a run with its owner and writes it (and what follows it)
// if its turn has come and no one else is writing.
func (c *collector) deliver(r *bucketRun) error {
	o := c.ownerOf(r.bucket)
	o.mu.Lock()
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	o.parked[r.bucket] = r
	if o.busy {
		o.mu.Unlock()
		return nil
	}
	o.busy = true
	return c.drainLocked(o)
}

// drainLocked writes the owner's parked runs that are next in order; it is
// called with o.mu held and o.busy set, and returns with both released.
func (c *collector) drainLocked(o *owner) error {
	for o.err == nil {
		r := o.parked[o.next]
		if r == nil {
			break
		}
		delete(o.parked, o.next)
		o.mu.Unlock()
		err := c.writeRun(o, r)
		o.mu.Lock()
		if err != nil {
			o.err = err
			break
		}
		o.next++
	}
	o.busy = false
	err := o.err
	o.mu.Unlock()
	return err
}

func (c *collector) writeRun(o *owner, r *bucketRun) error {
	defer r.release(c)
	for _, s := range r.segs {
		if err := c.readSegment(o, s); err != nil {
			return err
		}
	}
	for _, ch := range r.chunks {
		rest, err := c.addAll(o, ch)
		if err == nil && len(rest) > 0 {
			err = fmt.Errorf("internal error: a run ends inside an entry")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readSegment writes a spilled segment, read back a chunk at a time.
func (c *collector) readSegment(o *owner, s segment) error {
	if cap(o.rbuf) < readChunk {
		o.rbuf = make([]byte, 0, readChunk)
	}
	buf := o.rbuf[:0]
	for off, end := s.off, s.off+s.n; off < end || len(buf) > 0; {
		if off == end {
			return fmt.Errorf("internal error: spilled run in %s ends inside an entry", s.f.path)
		}
		// Room for at least the next whole entry, or a chunk.
		need := readChunk
		if len(buf) >= 8 {
			need = max(need, 8+int(binary.BigEndian.Uint32(buf))+int(binary.BigEndian.Uint32(buf[4:])))
		}
		if cap(buf) < need {
			nb := make([]byte, len(buf), need)
			copy(nb, buf)
			buf = nb
		}
		n := min(int64(cap(buf)-len(buf)), end-off)
		m, err := s.f.f.ReadAt(buf[len(buf):len(buf)+int(n)], off)
		if int64(m) < n {
			return fmt.Errorf("read back %s: %w", s.f.path, err)
		}
		off += n
		rest, err := c.addAll(o, buf[:len(buf)+int(n)])
		if err != nil {
			return err
		}
		buf = append(buf[:0], rest...)
	}
	if cap(buf) <= 4*readChunk {
		o.rbuf = buf[:0]
	}
	return nil
}

// addAll writes the whole entries at the head of b and returns the rest.
func (c *collector) addAll(o *owner, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	bw := c.writerOf(o)
	for len(b) >= 8 {
		kl := int(binary.BigEndian.Uint32(b))
		vl := int(binary.BigEndian.Uint32(b[4:]))
		if 8+kl+vl > len(b) {
			break
		}
		if err := bw.Add(b[8:8+kl], b[8+kl:8+kl+vl]); err != nil {
			return nil, err
		}
		b = b[8+kl+vl:]
	}
	return b, nil
}

// lazySpill makes the spill directory on first use.
func lazySpill(root string) (get func() (string, error), remove func()) {
	var (
		once sync.Once
		dir  *fsx.RunDir
		err  error
	)
	get = func() (string, error) {
		once.Do(func() {
			extsort.RemoveStale(nil, root)
			dir, err = extsort.MkdirSpill(nil, root)
			if err != nil {
				err = fmt.Errorf("in %s: %w", root, err)
			}
		})
		if err != nil {
			return "", err
		}
		return dir.Path, nil
	}
	remove = func() {
		if dir != nil {
			dir.Remove()
		}
	}
	return get, remove
}
