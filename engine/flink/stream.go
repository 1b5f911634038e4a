package flink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/golang/snappy"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Key-group section markers (FullSnapshotUtil).
const (
	metaFollowsFlag = 0x80
	endOfKeyGroup   = 0xFFFF
)

// KeyedStream is one keyed-state stream (a KeyGroupsSavepointStateHandle):
// its header and its key-group sections.
type KeyedStream struct {
	// Where names the stream in messages (operator, subtask, file).
	Where       string
	Handle      *KeyedHandle
	Header      *StreamHeader
	HeaderBytes []byte
	Size        int64

	r      io.ReaderAt
	closer io.Closer
}

// Section is one non-empty key group of a stream: [Start, End) in the
// stream, End being the next section's start or the stream's end.
type Section struct {
	KeyGroup   int
	Start, End int64
}

// OpenKeyed opens the keyed-state stream of a keyed handle and parses its
// header.
func (sp *Savepoint) OpenKeyed(op *OperatorState, subtask int32, h *KeyedHandle) (*KeyedStream, error) {
	r, size, closer, file, err := sp.openHandle(h.Delegate)
	where := fmt.Sprintf("operator %s subtask %d (%s)", op.Label(), subtask, file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ks, err := openKeyedStream(where, h, r, size)
	if err != nil {
		closer.Close()
		return nil, err
	}
	ks.closer = closer
	return ks, nil
}

func openKeyedStream(where string, h *KeyedHandle, r io.ReaderAt, size int64) (*KeyedStream, error) {
	ks := &KeyedStream{Where: where, Handle: h, r: r, Size: size}
	end := size
	for i, o := range h.Offsets {
		if o < 0 || o >= size {
			if o != 0 {
				return nil, fmt.Errorf("%w: %s: key group %d starts at offset %d, outside the %d-byte stream", snapshotfmt.ErrCorrupt, where, int(h.StartKeyGroup)+i, o, size)
			}
		}
		if o > 0 && o < end {
			end = o
		}
	}
	const maxHeader = 64 << 20
	if end > maxHeader {
		return nil, fmt.Errorf("%w: %s: keyed-state header of %d bytes", snapshotfmt.ErrTooLarge, where, end)
	}
	hb := make([]byte, end)
	if _, err := r.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("%s: read header: %w", where, err)
	}
	hdr, err := ParseHeader(hb, int(end))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ks.Header, ks.HeaderBytes = hdr, hb
	return ks, nil
}

// Close releases the stream's file.
func (ks *KeyedStream) Close() error {
	if ks.closer != nil {
		return ks.closer.Close()
	}
	return nil
}

// Sections lists the non-empty key groups in stream order.
func (ks *KeyedStream) Sections() []Section {
	var out []Section
	for i, o := range ks.Handle.Offsets {
		if o != 0 {
			out = append(out, Section{KeyGroup: int(ks.Handle.StartKeyGroup) + i, Start: o})
		}
	}
	slices.SortFunc(out, func(a, b Section) int { return int(a.Start - b.Start) })
	for i := range out {
		out[i].End = ks.Size
		if i+1 < len(out) {
			out[i].End = out[i+1].Start
		}
	}
	return out
}

// Entry is one key/value pair of a key-group section. Key is the full
// composite key (key-group prefix, key, namespace, user key; for timers
// prefix, timestamp, key, namespace) with the meta-data flag cleared.
// Key and Value are valid until the next entry.
type Entry struct {
	StateID int
	Key     []byte
	Value   []byte
	// framed is the whole entry as in the stream (i32 keyLen, key with the
	// flag cleared, i32 valueLen, value) when it lies in the read buffer
	// in one piece; nil otherwise.
	framed []byte
}

// Framed returns the entry as the stream frames it (i32 keyLen, key with
// the flag cleared, i32 valueLen, value), from the read buffer when it is
// there in one piece, else built in buf.
func (e *Entry) Framed(buf []byte) []byte {
	if e.framed != nil {
		return e.framed
	}
	buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(e.Key)))
	buf = append(buf, e.Key...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(e.Value)))
	return append(buf, e.Value...)
}

// SectionStats tells what reading a section found.
type SectionStats struct {
	Entries int64
	// Trailing is the number of bytes after the end mark and before the
	// next section (uncompressed streams; Flink writes none).
	Trailing int64
}

// sectionReader reads the entries of one section; reused across sections.
type sectionReader struct {
	br        *bufio.Reader
	sr        *snappy.Reader
	key, val  []byte
	remaining int64 // bytes left in an uncompressed section, -1 if unknown
	limit     int64 // bound on one length field
}

func (s *sectionReader) readFull(b []byte) error {
	_, err := io.ReadFull(s.br, b)
	if err == nil && s.remaining >= 0 {
		s.remaining -= int64(len(b))
	}
	return err
}

func (s *sectionReader) u16() (int, error) {
	var b [2]byte
	err := s.readFull(b[:])
	return int(binary.BigEndian.Uint16(b[:])), err
}

func (s *sectionReader) bytes(buf []byte, min int) ([]byte, error) {
	var b [4]byte
	if err := s.readFull(b[:]); err != nil {
		return buf, err
	}
	n := int64(int32(binary.BigEndian.Uint32(b[:])))
	if n < int64(min) || n > s.limit || (s.remaining >= 0 && n > s.remaining) {
		return buf, fmt.Errorf("length %d out of bounds", n)
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n, n+n/4)
	}
	buf = buf[:n]
	return buf, s.readFull(buf)
}

// entry reads one key/value pair. While the pair fits in the buffered
// reader it is returned as slices of the reader's buffer (no copy), valid
// until the next read; larger pairs are copied into reusable buffers.
func (s *sectionReader) entry() (key, val, framed []byte, err error) {
	// Fast path: the whole entry is already buffered and every bound
	// holds; anything else takes the checked path below, which reports.
	if nb := s.br.Buffered(); nb >= 8 {
		b, _ := s.br.Peek(nb) // buffered: no read, no error
		kl := int64(int32(binary.BigEndian.Uint32(b)))
		if kl >= 1 && kl <= s.limit && 8+kl <= int64(nb) {
			vl := int64(int32(binary.BigEndian.Uint32(b[4+kl:])))
			t := 8 + kl + vl
			if vl >= 0 && vl <= s.limit && t <= int64(nb) && (s.remaining < 0 || t <= s.remaining) {
				s.br.Discard(int(t))
				if s.remaining >= 0 {
					s.remaining -= t
				}
				return b[4 : 4+kl], b[8+kl : t], b[:t], nil
			}
		}
	}
	hdr, err := s.br.Peek(4)
	if err != nil {
		return nil, nil, nil, err
	}
	kl := int64(int32(binary.BigEndian.Uint32(hdr)))
	if kl < 1 || kl > s.limit || (s.remaining >= 0 && kl+8 > s.remaining) {
		return nil, nil, nil, fmt.Errorf("key length %d out of bounds", kl)
	}
	if n := 8 + int(kl); n <= s.br.Size() {
		b, err := s.br.Peek(n)
		if err != nil {
			return nil, nil, nil, err
		}
		vl := int64(int32(binary.BigEndian.Uint32(b[4+kl:])))
		if vl < 0 || vl > s.limit || (s.remaining >= 0 && kl+8+vl > s.remaining) {
			return nil, nil, nil, fmt.Errorf("value length %d out of bounds", vl)
		}
		if t := n + int(vl); t <= s.br.Size() {
			b, err := s.br.Peek(t)
			if err != nil {
				return nil, nil, nil, err
			}
			s.br.Discard(t)
			if s.remaining >= 0 {
				s.remaining -= int64(t)
			}
			return b[4 : 4+kl], b[8+kl : t], b[:t], nil
		}
	}
	if s.key, err = s.bytes(s.key, 1); err != nil {
		return nil, nil, nil, err
	}
	if s.val, err = s.bytes(s.val, 0); err != nil {
		return nil, nil, nil, err
	}
	return s.key, s.val, nil, nil
}

// ReadSection calls fn for every entry of the section, in stream order.
func (ks *KeyedStream) ReadSection(sec Section, rd *sectionReader, fn func(Entry) error) (SectionStats, error) {
	var st SectionStats
	if rd == nil {
		rd = &sectionReader{}
	}
	length := sec.End - sec.Start
	var src io.Reader = io.NewSectionReader(ks.r, sec.Start, length)
	rd.remaining, rd.limit = length, length
	if ks.Header.Compressed {
		if rd.sr == nil {
			rd.sr = snappy.NewReader(src)
		} else {
			rd.sr.Reset(src)
		}
		src = rd.sr
		rd.remaining, rd.limit = -1, 32*length+1<<16
	}
	if rd.br == nil {
		rd.br = bufio.NewReaderSize(src, 64<<10)
	} else {
		rd.br.Reset(src)
	}
	bad := func(err error, what string) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("truncated")
		}
		if errors.Is(err, snappy.ErrCorrupt) {
			err = errors.New("snappy frame corrupt (bad chunk or checksum)")
		}
		return fmt.Errorf("%w: %s: key group %d (bytes %d..%d): %s after %d entries: %v", snapshotfmt.ErrCorrupt, ks.Where, sec.KeyGroup, sec.Start, sec.End, what, st.Entries, err)
	}
	nStates := len(ks.Header.States)
	id, err := rd.u16()
	if err != nil {
		return st, bad(err, "state id")
	}
	for {
		if id >= nStates {
			return st, bad(fmt.Errorf("state id %d, the header declares %d states", id, nStates), "state id")
		}
		key, val, framed, err := rd.entry()
		if err != nil {
			return st, bad(err, "entry")
		}
		last := key[0]&metaFollowsFlag != 0
		key[0] &^= metaFollowsFlag
		st.Entries++
		if err := fn(Entry{StateID: id, Key: key, Value: val, framed: framed}); err != nil {
			return st, err
		}
		if !last {
			continue
		}
		next, err := rd.u16()
		if err != nil {
			return st, bad(err, "state id")
		}
		if next == endOfKeyGroup {
			break
		}
		id = next
	}
	if rd.remaining > 0 {
		st.Trailing = rd.remaining
	}
	return st, nil
}

// ForEach reads every section of the stream in order.
func (ks *KeyedStream) ForEach(fn func(kg int, e Entry) error) error {
	rd := &sectionReader{}
	for _, sec := range ks.Sections() {
		if _, err := ks.ReadSection(sec, rd, func(e Entry) error { return fn(sec.KeyGroup, e) }); err != nil {
			return err
		}
	}
	return nil
}
