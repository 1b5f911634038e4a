package flink

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/rebucket/rebucket/internal/fsx"
)

// owner collects the entries of a contiguous key-group range [lo, hi] and
// writes them as one canonical keyed-state file. A canonical stream needs
// entries grouped by key group and, inside it, by state, in no particular
// order otherwise; so the owner appends each arriving entry to the pages
// of its (key group, state) slot and never compares keys: grouping costs
// one sequential copy, and writing reads every page front to back (no
// gather from arrival order, whose cache misses dominated). When its
// memory share is full it writes the buffered slots as a run already
// grouped, with the entry count of every slot; writing merges the runs and
// the memory slot by slot, reading each run once, sequentially.
type owner struct {
	lo, hi   int
	nStates  int
	budget   int64
	spillDir string
	name     string

	slotBufs []slotBuf // by slot, allocated on the first entry
	pageSize int
	held     int64    // capacity of the pages in slotBufs
	free     [][]byte // pages of pageSize kept after a spill (held again when reused)
	runs     []*run
	spilled  int64
	spills   int // runs written (before merging)
	entries  uint64
	handle   *KeyedHandle
}

// slotBuf holds the framed entries of one (key group, state) slot in
// pages; the last page is being filled.
type slotBuf struct {
	pages   [][]byte
	n       int32 // entries
	lastOff int32 // where the last entry starts in the last page
}

const (
	// maxRuns bounds the runs merged at once (open files and read
	// buffers); more are first merged into one.
	maxRuns = 32
	// Page sizes: a share of the budget per slot, so the partly filled
	// last pages stay a small part of it.
	minPage = 512
	maxPage = 64 << 10
)

type run struct {
	path   string
	counts []int32 // entries per slot
}

func (o *owner) slots() int { return (o.hi - o.lo + 1) * o.nStates }

func (o *owner) slot(r *rec) int { return (int(r.kg)-o.lo)*o.nStates + int(r.state) }

// framedLen is the length of the framed entry at the start of b.
func framedLen(b []byte) int {
	kl := int(binary.BigEndian.Uint32(b))
	return 8 + kl + int(binary.BigEndian.Uint32(b[4+kl:]))
}

// testDamageEntry, set by tests only, alters the first framed entry of
// every page as it is written, to prove the self-check catches what it
// must.
var testDamageEntry func(e []byte)

// collect copies the entries of the batches routed to this owner into
// their slots and hands the batch buffers back to the scanners.
func (o *owner) collect(ch chan *batch) error {
	for b := range ch {
		if o.slotBufs == nil {
			o.slotBufs = make([]slotBuf, o.slots())
			o.pageSize = int(min(max(o.budget/int64(8*max(o.slots(), 1)), minPage), maxPage))
		}
		for i := range b.recs {
			r := &b.recs[i]
			if int(r.kg) < o.lo || int(r.kg) > o.hi {
				return fmt.Errorf("internal error: key group %d routed to the owner of %d..%d", r.kg, o.lo, o.hi)
			}
			e := b.buf[r.off:]
			o.add(o.slot(r), e[:framedLen(e)])
		}
		o.entries += uint64(len(b.recs))
		putBuf(b.buf)
		b.buf, b.recs = nil, b.recs[:0]
		batchPool.Put(b)
		if o.held >= o.budget {
			if err := o.spill(); err != nil {
				return err
			}
		}
	}
	return nil
}

// add appends a framed entry to its slot.
func (o *owner) add(slot int, e []byte) {
	sb := &o.slotBufs[slot]
	np := len(sb.pages)
	if np == 0 || cap(sb.pages[np-1])-len(sb.pages[np-1]) < len(e) {
		var pg []byte
		if len(e) <= o.pageSize && len(o.free) > 0 {
			pg, o.free = o.free[len(o.free)-1], o.free[:len(o.free)-1]
		} else {
			pg = make([]byte, 0, max(o.pageSize, len(e)))
		}
		o.held += int64(cap(pg))
		sb.pages = append(sb.pages, pg)
		np++
	}
	pg := sb.pages[np-1]
	sb.lastOff = int32(len(pg))
	sb.pages[np-1] = append(pg, e...)
	sb.n++
}

// reset drops the buffered entries, keeping pages of the usual size for
// reuse.
func (o *owner) reset() {
	for i := range o.slotBufs {
		sb := &o.slotBufs[i]
		for _, pg := range sb.pages {
			if cap(pg) == o.pageSize {
				o.free = append(o.free, pg[:0])
			}
		}
		*sb = slotBuf{pages: sb.pages[:0]}
	}
	o.held = 0
}

func (o *owner) spill() error {
	counts := make([]int32, len(o.slotBufs))
	some := false
	for i := range o.slotBufs {
		counts[i] = o.slotBufs[i].n
		some = some || counts[i] > 0
	}
	if !some {
		return nil
	}
	p := filepath.Join(o.spillDir, fsx.TempName(SpillPrefix))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.runs = append(o.runs, &run{path: p, counts: counts})
	o.spills++
	// A run holds the framed entries (as in the stream, no flags) in slot
	// order: the slots' pages one after the other.
	w := bufio.NewWriterSize(f, 256<<10)
	for i := range o.slotBufs {
		for _, pg := range o.slotBufs[i].pages {
			w.Write(pg)
			o.spilled += int64(len(pg))
		}
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	o.reset()
	if len(o.runs) >= maxRuns {
		return o.compact()
	}
	return nil
}

// compact merges all runs into one, slot by slot; each run is read once,
// sequentially.
func (o *owner) compact() error {
	p := filepath.Join(o.spillDir, fsx.TempName(SpillPrefix))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	merged := &run{path: p, counts: make([]int32, o.slots())}
	w := bufio.NewWriterSize(f, 256<<10)
	err = func() error {
		readers := make([]*bufio.Reader, len(o.runs))
		for i, r := range o.runs {
			rf, err := os.Open(r.path)
			if err != nil {
				return err
			}
			defer rf.Close()
			readers[i] = bufio.NewReaderSize(rf, 64<<10)
		}
		var buf []byte
		for slot := range merged.counts {
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					var err error
					if buf, err = readFramed(readers[i], buf); err != nil {
						return err
					}
					w.Write(buf)
				}
				merged.counts[slot] += r.counts[slot]
			}
		}
		return w.Flush()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return fmt.Errorf("merge spill runs: %w", err)
	}
	for _, r := range o.runs {
		os.Remove(r.path)
	}
	o.runs = []*run{merged}
	return nil
}

func (o *owner) cleanup() {
	for _, r := range o.runs {
		os.Remove(r.path)
	}
	o.runs = nil
	o.slotBufs, o.free = nil, nil
	o.held = 0
}

// write merges runs and memory into the owner's file in dir.
func (o *owner) write(ctx context.Context, dir string, _ int, header []byte) error {
	type runReader struct {
		f *os.File
		r *bufio.Reader
	}
	readers := make([]runReader, len(o.runs))
	defer func() {
		for _, rr := range readers {
			if rr.f != nil {
				rr.f.Close()
			}
		}
	}()
	for i, r := range o.runs {
		f, err := os.Open(r.path)
		if err != nil {
			return err
		}
		readers[i] = runReader{f, bufio.NewReaderSize(f, 64<<10)}
	}
	p := filepath.Join(dir, o.name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	sw, err := NewStreamWriter(f, header, o.lo, o.hi-o.lo+1)
	if err != nil {
		return err
	}
	var kbuf []byte
	for kg := o.lo; kg <= o.hi; kg++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		started := false
		for s := 0; s < o.nStates; s++ {
			slot := (kg-o.lo)*o.nStates + s
			var sb slotBuf
			if o.slotBufs != nil {
				sb = o.slotBufs[slot]
			}
			left := int(sb.n)
			for _, r := range o.runs {
				left += int(r.counts[slot])
			}
			if left == 0 {
				continue
			}
			if !started {
				if err := sw.StartKeyGroup(kg); err != nil {
					return err
				}
				started = true
			}
			for i, r := range o.runs {
				for c := r.counts[slot]; c > 0; c-- {
					var err error
					if kbuf, err = readFramed(readers[i].r, kbuf); err != nil {
						return err
					}
					left--
					if err := sw.AddFramed(s, kbuf, left == 0); err != nil {
						return err
					}
				}
			}
			// The slot's pages hold whole framed entries back to back;
			// the last page ends with the run's last entry.
			for pi, pg := range sb.pages {
				if testDamageEntry != nil {
					testDamageEntry(pg[:framedLen(pg)])
				}
				if err := sw.AddFramedRun(s, pg, pi == len(sb.pages)-1, int(sb.lastOff)); err != nil {
					return err
				}
			}
		}
	}
	offsets, size, err := sw.Finish()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	o.handle = &KeyedHandle{StartKeyGroup: int32(o.lo), Offsets: offsets, Delegate: &StreamHandle{Type: handleRelativeFile, Path: o.name, Size: size}}
	return nil
}

// readFramed reads one framed entry (i32 keyLen, key, i32 valueLen,
// value) of a spill run into buf.
func readFramed(r *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for part := 0; part < 2; part++ {
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return buf, fmt.Errorf("read spill run: %w", err)
		}
		n := int(binary.BigEndian.Uint32(l[:]))
		buf = append(buf, l[:]...)
		if cap(buf)-len(buf) < n {
			buf = slices.Grow(buf, n)
		}
		at := len(buf)
		buf = buf[:at+n]
		if _, err := io.ReadFull(r, buf[at:]); err != nil {
			return buf, fmt.Errorf("read spill run: %w", err)
		}
	}
	return buf, nil
}
