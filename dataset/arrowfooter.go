package dataset

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// checkArrowFooter bounds-checks the vectors of an Arrow IPC file's footer
// (schema fields, their children and metadata, the block lists) before the
// Arrow library reads it: the library sizes slices by the vector lengths
// the file claims, so a damaged footer could make it allocate without
// bound. Only lengths are checked; anything else that is wrong surfaces as
// an error (or a recovered panic) from the library itself.
func checkArrowFooter(f *os.File, size int64) error {
	const tail = 10 // int32 footer length + "ARROW1"
	bad := func(what string) error {
		return fmt.Errorf("%w: Arrow IPC footer: %s (truncated or damaged)", snapshotfmt.ErrCorrupt, what)
	}
	if size < 8+tail {
		return bad("file too small")
	}
	var t [tail]byte
	if _, err := f.ReadAt(t[:], size-tail); err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if string(t[4:]) != "ARROW1" {
		return bad("no closing ARROW1 magic")
	}
	n := int64(binary.LittleEndian.Uint32(t[:4]))
	if n <= 0 || n+8+tail > size {
		return bad("footer length out of range")
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-tail-n); err != nil {
		return fmt.Errorf("read %s: %w", f.Name(), err)
	}
	v := fbVerifier{b: buf}
	footer, ok := v.root()
	if !ok {
		return bad("root table out of range")
	}
	if !v.vectorOf(footer, 2, 24) || !v.vectorOf(footer, 3, 24) || !v.keyValues(footer, 4) {
		return bad("block or metadata list out of range")
	}
	// Every dictionary and record batch block lies in the file's body,
	// between the leading magic and the footer: a block past the end is
	// a truncated file, whose rows would otherwise be lost.
	for _, field := range []int{2, 3} {
		start, cnt, _ := v.vector(footer, field, 24)
		for j := 0; j < cnt; j++ {
			b := buf[start+24*j:]
			off := int64(binary.LittleEndian.Uint64(b))
			meta := int64(int32(binary.LittleEndian.Uint32(b[8:])))
			body := int64(binary.LittleEndian.Uint64(b[16:]))
			bodyEnd := size - tail - n
			if off < 8 || meta <= 0 || body < 0 || off > bodyEnd || meta > bodyEnd-off || body > bodyEnd-off-meta {
				what := "record batch"
				if field == 2 {
					what = "dictionary"
				}
				return bad(fmt.Sprintf("%s %d (offset %d, %d+%d bytes) lies outside the file's body (bytes 8..%d)", what, j, off, meta, body, bodyEnd))
			}
		}
	}
	if schema, ok := v.tableField(footer, 1); ok {
		if !v.keyValues(schema, 2) || !v.vectorOf(schema, 3, 8) || !v.fields(schema, 1, 0) {
			return bad("schema out of range")
		}
	}
	return nil
}

// fbVerifier checks flatbuffer offsets and vector lengths against the
// buffer.
type fbVerifier struct{ b []byte }

func (v fbVerifier) u32(off int) (int, bool) {
	if off < 0 || off+4 > len(v.b) {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(v.b[off:])), true
}

func (v fbVerifier) root() (int, bool) {
	o, ok := v.u32(0)
	return o, ok && v.tableOK(o)
}

func (v fbVerifier) tableOK(pos int) bool {
	so, ok := v.u32(pos)
	if !ok {
		return false
	}
	vt := pos - int(int32(so))
	if vt < 0 || vt+4 > len(v.b) {
		return false
	}
	vlen := int(binary.LittleEndian.Uint16(v.b[vt:]))
	return vlen >= 4 && vt+vlen <= len(v.b)
}

// fieldPos is the absolute position of field i of the table at pos (0 when
// absent).
func (v fbVerifier) fieldPos(pos, i int) int {
	so, _ := v.u32(pos)
	vt := pos - int(int32(so))
	vlen := int(binary.LittleEndian.Uint16(v.b[vt:]))
	e := 4 + 2*i
	if e+2 > vlen {
		return 0
	}
	off := int(binary.LittleEndian.Uint16(v.b[vt+e:]))
	if off == 0 {
		return 0
	}
	return pos + off
}

// target follows the uoffset stored at field i.
func (v fbVerifier) target(pos, i int) (int, bool, bool) {
	fp := v.fieldPos(pos, i)
	if fp == 0 {
		return 0, false, true
	}
	o, ok := v.u32(fp)
	if !ok {
		return 0, true, false
	}
	return fp + o, true, fp+o < len(v.b)
}

func (v fbVerifier) tableField(pos, i int) (int, bool) {
	t, present, ok := v.target(pos, i)
	return t, present && ok && v.tableOK(t)
}

// vector returns the start and length of the vector at field i, checking
// that n elements of elem bytes fit.
func (v fbVerifier) vector(pos, i, elem int) (start, n int, ok bool) {
	t, present, ok := v.target(pos, i)
	if !present {
		return 0, 0, true
	}
	if !ok {
		return 0, 0, false
	}
	n, ok = v.u32(t)
	if !ok || n < 0 || n > (len(v.b)-t-4)/elem {
		return 0, 0, false
	}
	return t + 4, n, true
}

func (v fbVerifier) vectorOf(pos, i, elem int) bool {
	_, _, ok := v.vector(pos, i, elem)
	return ok
}

// tables checks a vector of tables at field i and calls each for every
// table.
func (v fbVerifier) tables(pos, i int, each func(int) bool) bool {
	start, n, ok := v.vector(pos, i, 4)
	if !ok {
		return false
	}
	for j := 0; j < n; j++ {
		e := start + 4*j
		o, _ := v.u32(e)
		if !v.tableOK(e+o) || !each(e+o) {
			return false
		}
	}
	return true
}

func (v fbVerifier) keyValues(pos, i int) bool {
	return v.tables(pos, i, func(kv int) bool { return v.vectorOf(kv, 0, 1) && v.vectorOf(kv, 1, 1) })
}

// fields checks a vector of Field tables (name, dictionary, children,
// custom metadata), recursively to a bounded depth.
func (v fbVerifier) fields(pos, i, depth int) bool {
	if depth > 64 {
		return false
	}
	return v.tables(pos, i, func(f int) bool {
		if !v.vectorOf(f, 0, 1) || !v.keyValues(f, 6) {
			return false
		}
		if _, present, ok := v.target(f, 3); present && (!ok || !v.tableOK(mustTarget(v, f, 3))) {
			return false
		}
		if _, present, ok := v.target(f, 4); present && (!ok || !v.tableOK(mustTarget(v, f, 4))) {
			return false
		}
		return v.fields(f, 5, depth+1)
	})
}

func mustTarget(v fbVerifier, pos, i int) int {
	t, _, _ := v.target(pos, i)
	return t
}
