package flink

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// StreamWriter writes a canonical keyed-state stream as
// FullSnapshotAsyncWriter does: the header, then per non-empty key group
// (in increasing order) a section that starts with the state id, holds the
// entries of each state as one run, sets the 0x80 flag on the first byte
// of the key of each run's last entry, then writes the next state id or
// 0xFFFF. With compression each section is its own Snappy framed stream
// (xerial SnappyFramedOutputStream format, which golang/snappy's Writer
// also writes: stream identifier, chunks with masked CRC-32C).
type StreamWriter struct {
	cw         countingWriter
	compressed bool
	sw         *snappy.Writer
	out        io.Writer // cw, or sw inside a compressed section
	start      int       // first key group of the range
	offsets    []int64
	kg         int // current key group, -1 before the first
	state      int // current state id, -1 at the start of a section
	pk, pv     []byte
	pending    bool
	runOpen    bool // AddFramed: the current run's last entry is not written yet
	scratch    [4]byte
}

type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// NewStreamWriter writes header (copied verbatim; its compression flag
// decides the sections' framing) and returns a writer for key groups
// start .. start+num-1.
func NewStreamWriter(w io.Writer, header []byte, start, num int) (*StreamWriter, error) {
	if len(header) < 5 {
		return nil, fmt.Errorf("%w: keyed-state header of %d bytes", snapshotfmt.ErrInvalidArgument, len(header))
	}
	sw := &StreamWriter{compressed: header[4] == 1, start: start, offsets: make([]int64, num), kg: -1, state: -1}
	sw.cw.w = bufio.NewWriterSize(w, 256<<10)
	sw.out = &sw.cw
	if _, err := sw.cw.Write(header); err != nil {
		return nil, err
	}
	return sw, nil
}

// StartKeyGroup ends the current section and starts the one of kg.
// Key groups must come in increasing order.
func (w *StreamWriter) StartKeyGroup(kg int) error {
	if kg <= w.kg || kg < w.start || kg >= w.start+len(w.offsets) {
		return fmt.Errorf("%w: key group %d after %d, range %d..%d", snapshotfmt.ErrInvalidArgument, kg, w.kg, w.start, w.start+len(w.offsets)-1)
	}
	if err := w.endSection(); err != nil {
		return err
	}
	w.kg, w.state = kg, -1
	w.offsets[kg-w.start] = w.cw.n
	if w.compressed {
		if w.sw == nil {
			w.sw = snappy.NewBufferedWriter(&w.cw)
		} else {
			w.sw.Reset(&w.cw)
		}
		w.out = w.sw
	}
	return nil
}

func (w *StreamWriter) u16(v int) error {
	binary.BigEndian.PutUint16(w.scratch[:2], uint16(v))
	_, err := w.out.Write(w.scratch[:2])
	return err
}

func (w *StreamWriter) flushPending(last bool) error {
	if !w.pending {
		return nil
	}
	if last {
		w.pk[0] |= metaFollowsFlag
	}
	for _, b := range [][]byte{w.pk, w.pv} {
		binary.BigEndian.PutUint32(w.scratch[:], uint32(len(b)))
		if _, err := w.out.Write(w.scratch[:]); err != nil {
			return err
		}
		if _, err := w.out.Write(b); err != nil {
			return err
		}
	}
	w.pending = false
	return nil
}

// Add writes one entry of the current key group. Entries of one state
// must be contiguous within a key group. key is the full composite key,
// whose first byte (the key-group prefix) must be below 0x80.
func (w *StreamWriter) Add(stateID int, key, value []byte) error {
	if w.kg < 0 {
		return fmt.Errorf("%w: entry before the first key group", snapshotfmt.ErrInvalidArgument)
	}
	if len(key) == 0 || key[0]&metaFollowsFlag != 0 {
		return fmt.Errorf("%w: key %x has no key-group prefix below 0x80", snapshotfmt.ErrInvalidArgument, key)
	}
	if stateID < 0 || stateID >= endOfKeyGroup {
		return fmt.Errorf("%w: state id %d", snapshotfmt.ErrInvalidArgument, stateID)
	}
	if stateID != w.state {
		if err := w.flushPending(true); err != nil {
			return err
		}
		if err := w.u16(stateID); err != nil {
			return err
		}
		w.state = stateID
	} else if err := w.flushPending(false); err != nil {
		return err
	}
	w.pk = append(w.pk[:0], key...)
	w.pv = append(w.pv[:0], value...)
	w.pending = true
	return nil
}

// AddFramed writes one entry of the current key group already framed as
// in the stream: i32 keyLen, key (with its key-group prefix), i32
// valueLen, value. last says it ends its state's run in this key group:
// then the 0x80 flag is set on e's first key byte (in place; e belongs to
// the caller, which knows the run lengths, so nothing is buffered or
// copied here). Add and AddFramed must not be mixed within a key group.
func (w *StreamWriter) AddFramed(stateID int, e []byte, last bool) error {
	if err := checkFramed(e, true); err != nil {
		return err
	}
	return w.addFramed(stateID, e, last, 0)
}

// AddFramedRun writes b, framed entries of one state back to back, as
// AddFramed would write them one by one but in one write. With last, b
// ends the state's run and lastOff is where b's last entry starts (its
// flag is set in place). Only the framing of b's first and last entries
// is checked here; Rewrite re-reads every entry before publishing.
func (w *StreamWriter) AddFramedRun(stateID int, b []byte, last bool, lastOff int) error {
	if err := checkFramed(b, false); err != nil {
		return err
	}
	if last {
		if lastOff < 0 || lastOff >= len(b) {
			return fmt.Errorf("%w: last entry at %d of a %d-byte run", snapshotfmt.ErrInvalidArgument, lastOff, len(b))
		}
		if err := checkFramed(b[lastOff:], true); err != nil {
			return err
		}
	}
	return w.addFramed(stateID, b, last, lastOff)
}

// checkFramed checks the framing of the entry at the start of e (and that
// it fills e, with whole) and that its prefix has no flag.
func checkFramed(e []byte, whole bool) error {
	if len(e) < 9 {
		return fmt.Errorf("%w: framed entry of %d bytes", snapshotfmt.ErrInvalidArgument, len(e))
	}
	kl := int64(binary.BigEndian.Uint32(e))
	if kl < 1 || kl > int64(len(e))-8 {
		return fmt.Errorf("%w: framed entry of %d bytes with key length %d", snapshotfmt.ErrInvalidArgument, len(e), kl)
	}
	if n := 8 + kl + int64(binary.BigEndian.Uint32(e[4+kl:])); n > int64(len(e)) || whole && n != int64(len(e)) {
		return fmt.Errorf("%w: framed entry of %d bytes in %d", snapshotfmt.ErrInvalidArgument, n, len(e))
	}
	if e[4]&metaFollowsFlag != 0 {
		return fmt.Errorf("%w: key %x has no key-group prefix below 0x80", snapshotfmt.ErrInvalidArgument, e[4:4+kl])
	}
	return nil
}

func (w *StreamWriter) addFramed(stateID int, e []byte, last bool, lastOff int) error {
	if w.kg < 0 {
		return fmt.Errorf("%w: entry before the first key group", snapshotfmt.ErrInvalidArgument)
	}
	if stateID < 0 || stateID >= endOfKeyGroup {
		return fmt.Errorf("%w: state id %d", snapshotfmt.ErrInvalidArgument, stateID)
	}
	if w.pending {
		return fmt.Errorf("%w: Add and AddFramed mixed in key group %d", snapshotfmt.ErrInvalidArgument, w.kg)
	}
	if stateID != w.state {
		if w.runOpen {
			return fmt.Errorf("%w: run of state %d in key group %d not ended before state %d", snapshotfmt.ErrInvalidArgument, w.state, w.kg, stateID)
		}
		if err := w.u16(stateID); err != nil {
			return err
		}
		w.state = stateID
	} else if !w.runOpen {
		return fmt.Errorf("%w: state %d has two runs in key group %d", snapshotfmt.ErrInvalidArgument, stateID, w.kg)
	}
	if last {
		e[lastOff+4] |= metaFollowsFlag
	}
	w.runOpen = !last
	_, err := w.out.Write(e)
	return err
}

func (w *StreamWriter) endSection() error {
	if w.kg < 0 {
		return nil
	}
	if w.runOpen {
		return fmt.Errorf("%w: run of state %d in key group %d not ended", snapshotfmt.ErrInvalidArgument, w.state, w.kg)
	}
	if !w.pending {
		// A started key group without entries: Flink never writes one;
		// drop it so the offset says "empty".
		if w.state < 0 {
			if w.compressed {
				return fmt.Errorf("%w: empty key group %d", snapshotfmt.ErrInvalidArgument, w.kg)
			}
			w.offsets[w.kg-w.start] = 0
			return nil
		}
	}
	if err := w.flushPending(true); err != nil {
		return err
	}
	if err := w.u16(endOfKeyGroup); err != nil {
		return err
	}
	if w.compressed {
		if err := w.sw.Close(); err != nil {
			return err
		}
		w.out = &w.cw
	}
	return nil
}

// Finish ends the last section, flushes, and returns the offsets of the
// key groups (0 = empty) and the stream's size.
func (w *StreamWriter) Finish() ([]int64, int64, error) {
	if err := w.endSection(); err != nil {
		return nil, 0, err
	}
	w.kg = w.start + len(w.offsets) // no more entries
	if err := w.cw.w.Flush(); err != nil {
		return nil, 0, err
	}
	return w.offsets, w.cw.n, nil
}
