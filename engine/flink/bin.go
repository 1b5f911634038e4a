package flink

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// dec reads java.io.DataInputStream primitives (big-endian) from a byte
// slice. The first error sticks: later reads return zero values, so a
// decoder checks d.err once per structure instead of after every field.
type dec struct {
	b    []byte
	pos  int
	err  error
	what string // what is being read, for error messages
}

func (d *dec) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d: %s", snapshotfmt.ErrCorrupt, d.what, d.pos, fmt.Sprintf(format, a...))
	}
}

func (d *dec) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b)-d.pos < n {
		d.fail("truncated: need %d bytes, %d left", n, len(d.b)-d.pos)
		return false
	}
	return true
}

func (d *dec) u8() byte {
	if !d.need(1) {
		return 0
	}
	v := d.b[d.pos]
	d.pos++
	return v
}

func (d *dec) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.b[d.pos:])
	d.pos += 2
	return v
}

func (d *dec) i32() int32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.pos:])
	d.pos += 4
	return int32(v)
}

func (d *dec) i64() int64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.pos:])
	d.pos += 8
	return int64(v)
}

func (d *dec) bytes(n int) []byte {
	if !d.need(n) {
		return nil
	}
	v := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return v
}

// utf reads a writeUTF string: u16 length, then modified UTF-8. The bytes
// are kept as they are (see JavaString) so that encoding reproduces them.
func (d *dec) utf() string {
	n := int(d.u16())
	return string(d.bytes(n))
}

// count reads an i32 element count and checks that count elements of at
// least minSize bytes each can still follow, so a corrupt count never
// allocates more than the input could hold.
func (d *dec) count(minSize int, what string) int {
	n := d.i32()
	if d.err != nil {
		return 0
	}
	if n < 0 {
		d.fail("negative %s count %d", what, n)
		return 0
	}
	if minSize > 0 && int64(n)*int64(minSize) > int64(len(d.b)-d.pos) {
		d.fail("%s count %d does not fit in the %d bytes left", what, n, len(d.b)-d.pos)
		return 0
	}
	return int(n)
}

// enc writes java.io.DataOutputStream primitives.
type enc struct{ b []byte }

func (e *enc) u8(v byte)    { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) i32(v int32)  { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64)  { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) raw(v []byte) { e.b = append(e.b, v...) }

// utf writes a string that holds modified UTF-8 bytes (as read by
// dec.utf, or made by JavaUTF). Java refuses strings over 65535 bytes.
func (e *enc) utf(s string) error {
	if len(s) > math.MaxUint16 {
		return fmt.Errorf("%w: string of %d bytes is longer than Java's writeUTF allows (65535)", snapshotfmt.ErrInvalidArgument, len(s))
	}
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
	return nil
}

// JavaString converts Java's modified UTF-8 (writeUTF: NUL as C0 80,
// supplementary characters as two 3-byte surrogates) into a Go string.
// Bytes that are not valid modified UTF-8 become U+FFFD.
func JavaString(m string) string {
	ascii := true
	for i := 0; i < len(m); i++ {
		if m[i] >= 0x80 || m[i] == 0 {
			ascii = false
			break
		}
	}
	if ascii {
		return m
	}
	u := make([]uint16, 0, len(m))
	for i := 0; i < len(m); {
		c := m[i]
		switch {
		case c < 0x80:
			u = append(u, uint16(c))
			i++
		case c&0xE0 == 0xC0 && i+1 < len(m) && m[i+1]&0xC0 == 0x80:
			u = append(u, uint16(c&0x1F)<<6|uint16(m[i+1]&0x3F))
			i += 2
		case c&0xF0 == 0xE0 && i+2 < len(m) && m[i+1]&0xC0 == 0x80 && m[i+2]&0xC0 == 0x80:
			u = append(u, uint16(c&0x0F)<<12|uint16(m[i+1]&0x3F)<<6|uint16(m[i+2]&0x3F))
			i += 3
		default:
			u = append(u, 0xFFFD)
			i++
		}
	}
	return utf16ToString(u)
}

// JavaUTF converts a Go string into Java's modified UTF-8.
func JavaUTF(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			r = 0xFFFD
		}
		if r > 0xFFFF {
			r -= 0x10000
			out = appendMUTF(out, uint16(0xD800+(r>>10)))
			out = appendMUTF(out, uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = appendMUTF(out, uint16(r))
	}
	return string(out)
}

func appendMUTF(out []byte, c uint16) []byte {
	switch {
	case c != 0 && c < 0x80:
		return append(out, byte(c))
	case c < 0x800:
		return append(out, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	default:
		return append(out, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
}

func utf16ToString(u []uint16) string {
	out := make([]rune, 0, len(u))
	for i := 0; i < len(u); i++ {
		c := rune(u[i])
		if c >= 0xD800 && c < 0xDC00 && i+1 < len(u) && u[i+1] >= 0xDC00 && u[i+1] < 0xE000 {
			out = append(out, 0x10000+(c-0xD800)<<10+(rune(u[i+1])-0xDC00))
			i++
			continue
		}
		if c >= 0xD800 && c < 0xE000 {
			c = 0xFFFD
		}
		out = append(out, c)
	}
	return string(out)
}
