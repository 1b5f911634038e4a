package snapshotfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The streaming encoder must produce exactly Encode's bytes, including the
// corners encoding/json handles on its own: nil and empty slices, HTML
// escaping, omitted optional lineage fields, nanosecond times.
func TestCanonicalMatchesEncode(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(m *Manifest)
	}{
		{"valid", func(m *Manifest) {}},
		{"nil slices", func(m *Manifest) { m.States, m.WorkerStates, m.Lineage = nil, nil, nil }},
		{"empty slices", func(m *Manifest) {
			m.States, m.WorkerStates, m.Lineage = []State{}, []WorkerState{}, []Lineage{}
		}},
		{"worker state without files", func(m *Manifest) { m.WorkerStates[0].Files = nil; m.WorkerStates[1].Files = []WorkerFile{} }},
		{"html and unicode", func(m *Manifest) {
			m.Tool = "a<b>&c \u2028 größe \x01"
			m.States[0].Step = `"quoted" \ <step>`
			m.WorkerStates[0].Name = "n&m"
		}},
		{"lineage variants", func(m *Manifest) {
			m.Lineage = append(m.Lineage, Lineage{Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)), Tool: "t", Action: "rewrite", FromBuckets: 8, FromMapping: MappingMod, ToBuckets: 16, ToMapping: MappingRange, Note: "why"})
		}},
		{"cut widths", func(m *Manifest) { m.CutWidths = []int{1, 4, 40} }},
		{"no buckets", func(m *Manifest) { m.BucketEntries, m.BucketBytes, m.Files = nil, nil, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Manifest
			if err := json.Unmarshal(validManifest(t), &m); err != nil {
				t.Fatal(err)
			}
			tc.f(&m)
			want, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			c := newCanon(want)
			c.encode(&m)
			if c.err != nil || c.mismatch >= 0 {
				t.Fatalf("streamed encoding differs from Encode at byte %d (%v): %q", c.mismatch, c.err, want[max(0, c.mismatch-40):min(len(want), c.mismatch+40)])
			}
			body, _ := m.body()
			if c.sum() != Checksum(body) {
				t.Fatalf("streamed body checksum %s, Encode's body hashes to %s", c.sum(), Checksum(body))
			}
		})
	}
}

// Go's decoder matches member names case-insensitively and keeps the last
// of two; a compact or reformatted manifest re-encodes to the same body.
// Each of these decoded before; another parser could read another
// document from the same bytes.
func TestDecodeManifestNotCanonical(t *testing.T) {
	valid := validManifest(t)
	var m Manifest
	if err := json.Unmarshal(valid, &m); err != nil {
		t.Fatal(err)
	}
	compact := func() []byte {
		var b bytes.Buffer
		if err := json.Compact(&b, valid); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		field string
	}{
		{"compact", compact(), "canonical"},
		{"reindented", bytes.ReplaceAll(valid, []byte("\n "), []byte("\n  ")), "canonical"},
		{"no final newline", valid[:len(valid)-1], "canonical"},
		{"two final newlines", append(bytes.Clone(valid), '\n'), "canonical"},
		{"duplicate member", bytes.Replace(valid, []byte(`"tool":`), []byte(`"tool": "other", "tool":`), 1), `"tool" appears twice`},
		{"duplicate nested member", bytes.Replace(valid, []byte(`"bucket_lo":`), []byte(`"bucket_lo": 7, "bucket_lo":`), 1), `"bucket_lo" appears twice`},
		{"case variant", bytes.Replace(valid, []byte(`"tool":`), []byte(`"Tool":`), 1), `"Tool"`},
		{"case variant duplicate", bytes.Replace(valid, []byte(`"tool":`), []byte(`"tool": "x", "TOOL":`), 1), `"TOOL" appears twice`},
		{"kelvin sign", bytes.Replace(valid, []byte(`"checksum": "`+m.Files[0].Checksum), []byte(`"chec\u212asum": "`+m.Files[0].Checksum), 1), "not spelt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeManifest(tc.data)
			if err == nil {
				t.Fatalf("accepted: tool %q", got.Tool)
			}
			if !isCorrupt(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want ErrCorrupt naming %s", err, tc.field)
			}
		})
	}
}

func isCorrupt(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrCorrupt.Error())
}

// bigManifest is a valid manifest of about size bytes: one worker state
// with many per-worker files.
func bigManifest(t testing.TB, size int) []byte {
	var m Manifest
	if err := json.Unmarshal(validManifest(t), &m); err != nil {
		t.Fatal(err)
	}
	n := size / 150
	m.WidthAtWrite = n
	for i := range m.WorkerStates {
		f0 := m.WorkerStates[i].Files[0]
		files := make([]WorkerFile, n)
		for w := range files {
			files[w] = f0
			files[w].Worker = w
			files[w].Path = fmt.Sprintf("workers/%03d-%07d.bin", i, w)
		}
		m.WorkerStates[i].Files = files
	}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeManifestAllocations bounds what decoding allocates: the
// decoded structs, not copies of the document. Before decoding streamed
// its canonical check (a Decoder buffering the whole input, then
// MarshalIndent's two buffers), a manifest allocated about 10.5x its size;
// now about 3x, most of it the decoded slices growing.
func TestDecodeManifestAllocations(t *testing.T) {
	data := bigManifest(t, 4<<20)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := DecodeManifest(data)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("decoding a %d MiB manifest (%d worker files) allocated %d MiB", len(data)>>20, 2*m.WidthAtWrite, alloc>>20)
	if alloc > 4*uint64(len(data)) {
		t.Fatalf("decoding a %d-byte manifest allocated %d bytes, over 4x its size", len(data), alloc)
	}
}
