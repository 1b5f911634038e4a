package snapshotfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/xxh3"
)

// canon produces the canonical encoding of a manifest (Encode's bytes) one
// small piece at a time: it hashes the body (checksum field empty) and
// compares every piece with the file's bytes as it goes. Decoding a 64 MiB
// manifest thus holds the file and the decoded structs, never a second or
// third copy of the document (json.MarshalIndent builds two).
type canon struct {
	data     []byte
	pos      int
	h        *xxh3.Hasher
	mismatch int // offset of the first byte that differs, -1 while none
	err      error
	scratch  []byte
	encs     map[int]*json.Encoder
}

// valueWriter feeds an Encoder's output to put, less the newline the
// Encoder ends every value with.
type valueWriter struct{ c *canon }

func (w valueWriter) Write(b []byte) (int, error) {
	w.c.put(bytes.TrimSuffix(b, []byte("\n")), true)
	return len(b), nil
}

func newCanon(data []byte) *canon {
	return &canon{data: data, h: xxh3.New(), mismatch: -1, encs: map[int]*json.Encoder{}}
}

// put emits b: hashed into the body when hash is set, and compared with the
// file at the current offset.
func (c *canon) put(b []byte, hash bool) {
	if hash {
		_, _ = c.h.Write(b)
	}
	if c.mismatch < 0 {
		rest := c.data[min(c.pos, len(c.data)):]
		n := min(len(b), len(rest))
		for i := 0; i < n; i++ {
			if rest[i] != b[i] {
				c.mismatch = c.pos + i
				break
			}
		}
		if c.mismatch < 0 && n < len(b) {
			c.mismatch = len(c.data)
		}
	}
	c.pos += len(b)
}

func (c *canon) str(s string) { c.put([]byte(s), true) }

func (c *canon) nl(depth int) {
	c.scratch = append(c.scratch[:0], '\n')
	for range depth {
		c.scratch = append(c.scratch, ' ')
	}
	c.put(c.scratch, true)
}

// value emits v as MarshalIndent encodes it at this depth. An Encoder per
// depth reuses its buffers, so a value costs no garbage of its size.
func (c *canon) value(v any, depth int) {
	enc := c.encs[depth]
	if enc == nil {
		enc = json.NewEncoder(valueWriter{c})
		enc.SetIndent(strings.Repeat(" ", depth), " ")
		c.encs[depth] = enc
	}
	if err := enc.Encode(v); err != nil && c.err == nil {
		c.err = err
	}
}

// key emits the start of an object member: newline, indent, "name": .
func (c *canon) key(name string, depth int, first bool) {
	if !first {
		c.str(",")
	}
	c.nl(depth)
	c.str(strconv.Quote(name) + ": ")
}

// slice emits a slice of n elements at depth (the depth of its key), each
// by elem at depth+1; a nil slice is null, as encoding/json writes it.
func (c *canon) slice(isNil bool, n, depth int, elem func(i, depth int)) {
	switch {
	case isNil:
		c.str("null")
		return
	case n == 0:
		c.str("[]")
		return
	}
	c.str("[")
	for i := range n {
		if i > 0 {
			c.str(",")
		}
		c.nl(depth + 1)
		elem(i, depth+1)
	}
	c.nl(depth)
	c.str("]")
}

func (c *canon) uints(u []uint64, depth int) {
	c.slice(u == nil, len(u), depth, func(i, _ int) {
		c.scratch = strconv.AppendUint(c.scratch[:0], u[i], 10)
		c.put(c.scratch, true)
	})
}

// encode streams the canonical encoding of m, followed by the newline
// Encode appends. The field order is Manifest's; canonicalMatchesEncode
// (a test) holds it to json.MarshalIndent.
func (c *canon) encode(m *Manifest) {
	c.str("{")
	c.key("format", 1, true)
	c.value(m.Format, 1)
	c.key("version", 1, false)
	c.value(m.Version, 1)
	c.key("table_format", 1, false)
	c.value(m.TableFormat, 1)
	c.key("created", 1, false)
	c.value(m.Created, 1)
	c.key("tool", 1, false)
	c.value(m.Tool, 1)
	c.key("partitioning", 1, false)
	c.value(m.Partitioning, 1)
	c.key("width_at_write", 1, false)
	c.value(m.WidthAtWrite, 1)
	if len(m.CutWidths) > 0 { // omitempty
		c.key("cut_widths", 1, false)
		c.slice(false, len(m.CutWidths), 1, func(i, _ int) {
			c.scratch = strconv.AppendInt(c.scratch[:0], int64(m.CutWidths[i]), 10)
			c.put(c.scratch, true)
		})
	}
	c.key("states", 1, false)
	c.slice(m.States == nil, len(m.States), 1, func(i, d int) { c.value(m.States[i], d) })
	c.key("files", 1, false)
	c.slice(m.Files == nil, len(m.Files), 1, func(i, d int) { c.value(m.Files[i], d) })
	c.key("bucket_entries", 1, false)
	c.uints(m.BucketEntries, 1)
	c.key("bucket_bytes", 1, false)
	c.uints(m.BucketBytes, 1)
	c.key("worker_states", 1, false)
	c.slice(m.WorkerStates == nil, len(m.WorkerStates), 1, func(i, d int) {
		ws := &m.WorkerStates[i]
		c.str("{")
		c.key("step", d+1, true)
		c.value(ws.Step, d+1)
		c.key("name", d+1, false)
		c.value(ws.Name, d+1)
		c.key("rule", d+1, false)
		c.value(ws.Rule, d+1)
		c.key("files", d+1, false)
		c.slice(ws.Files == nil, len(ws.Files), d+1, func(j, d int) { c.value(ws.Files[j], d) })
		c.nl(d)
		c.str("}")
	})
	c.key("lineage", 1, false)
	c.slice(m.Lineage == nil, len(m.Lineage), 1, func(i, d int) { c.value(m.Lineage[i], d) })
	// The body carries an empty checksum; the file carries the real one,
	// compared but not hashed.
	c.key("checksum", 1, false)
	c.str(`"`)
	c.put([]byte(m.Checksum), false)
	c.str(`"`)
	c.nl(0)
	c.str("}")
	c.put([]byte("\n"), false)
	if c.mismatch < 0 && c.pos != len(c.data) {
		c.mismatch = c.pos
	}
}

// sum is the hex XXH3-128 of the body.
func (c *canon) sum() string { return Sum128Hex(c.h.Sum128()) }

// manifestKeys is every member name the manifest's JSON may use.
var manifestKeys = func() map[string]bool {
	keys := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Slice, reflect.Pointer:
			walk(t.Elem())
		case reflect.Struct:
			if t == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				keys[name] = true
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[Manifest]())
	return keys
}()

// whyNotCanonical explains why a manifest that decoded, and whose body
// hashes to its checksum, is not byte for byte its canonical encoding. It
// runs only on that failure path, so its extra passes cost nothing on a
// good manifest. Messages name keys and offsets, never values.
func whyNotCanonical(data []byte, off int) error {
	// An unknown member: the strict decoder names it.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	// A member twice, or spelt with other letter case: encoding/json
	// matches names case-insensitively and keeps the last duplicate, so
	// another parser would read another document.
	if err := checkKeys(data); err != nil {
		return err
	}
	line := 1 + bytes.Count(data[:min(off, len(data))], []byte("\n"))
	return fmt.Errorf("%w: manifest is not in the canonical encoding (byte %d, line %d differs): a manifest must be exactly json.MarshalIndent(m, \"\", \" \") plus a newline (FORMAT.md section 8); reformatted or hand-edited?", ErrCorrupt, off, line)
}

// checkKeys walks every object and refuses a member name used twice
// (compared case-insensitively, as encoding/json matches them) or not
// spelt exactly as the format names it.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj    bool
		expect bool // next token of an object is a key
		seen   map[string]string
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // syntax was checked by the decoder already
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.obj && top.expect {
				if k, ok := tok.(string); ok {
					fold := strings.ToLower(k)
					if prev, dup := top.seen[fold]; dup {
						return fmt.Errorf("%w: manifest: member %q appears twice in one object (also as %q): one spelling, once", ErrCorrupt, k, prev)
					}
					top.seen[fold] = k
					if !manifestKeys[k] {
						return fmt.Errorf("%w: manifest: member %q is not spelt as the format names it (names are lowercase, matched exactly)", ErrCorrupt, k)
					}
					top.expect = false
					continue
				}
			}
			if top.obj {
				top.expect = true
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, expect: true, seen: map[string]string{}})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].expect = true
			}
		}
	}
}
