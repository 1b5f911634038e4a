package snapshotfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

// testdata/valid.json is the manifest of a small generated snapshot
// (8 buckets, width 4, 7 data files, two per-worker states).
func validManifest(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeManifestValid(t *testing.T) {
	data := validManifest(t)
	m, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Partitioning.Buckets != 8 || m.WidthAtWrite != 4 || len(m.Files) < 2 || len(m.WorkerStates) != 2 {
		t.Fatalf("unexpected manifest: %+v", m)
	}
	if m.TotalEntries() == 0 || m.TotalBytes() == 0 || m.DataBytes() == 0 {
		t.Error("zero totals")
	}
	// The canonical encoding is stable: re-encoding reproduces the file
	// byte for byte, so the self-checksum can be recomputed by anyone.
	again, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("Encode(DecodeManifest(valid.json)) differs from valid.json")
	}
	m2, err := ReadManifest(bytes.NewReader(again))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Error("round trip changed the manifest")
	}
	if s, ok := m.StateByName("sessions/open"); !ok || s.Kind != KindMap {
		t.Errorf("StateByName = %+v, %v", s, ok)
	}
	if _, ok := m.StateByID(99); ok {
		t.Error("StateByID(99) found a state")
	}
}

// reseal applies f to the valid manifest and encodes it with a fresh
// self-checksum, so Validate (not the checksum) is what must catch it.
func reseal(t *testing.T, f func(m *Manifest)) []byte {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal(validManifest(t), &m); err != nil {
		t.Fatal(err)
	}
	f(&m)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// edit replaces the first occurrence of old in the valid manifest.
func edit(t *testing.T, old, new string) []byte {
	t.Helper()
	data := validManifest(t)
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("valid.json has no %q", old)
	}
	return bytes.Replace(data, []byte(old), []byte(new), 1)
}

func TestDecodeManifestStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		data func(t *testing.T) []byte
		want error
		// field is what the message must name.
		field string
	}{
		{"unknown version", func(t *testing.T) []byte { return edit(t, `"version": 1`, `"version": 2`) }, ErrUnsupported, "version 2"},
		{"unknown version with unknown fields", func(t *testing.T) []byte {
			return edit(t, `"version": 1,`, `"version": 7, "new_thing": {},`)
		}, ErrUnsupported, "version 7"},
		{"unknown format", func(t *testing.T) []byte { return edit(t, `"rebucket-snapshot"`, `"other"`) }, ErrCorrupt, "format"},
		{"unknown top-level field", func(t *testing.T) []byte { return edit(t, `"tool":`, `"extra": 1, "tool":`) }, ErrCorrupt, `"extra"`},
		{"unknown field in a file", func(t *testing.T) []byte { return edit(t, `"bucket_lo":`, `"owner": "x", "bucket_lo":`) }, ErrCorrupt, `"owner"`},
		{"unknown field in partitioning", func(t *testing.T) []byte { return edit(t, `"hash":`, `"seed": 1, "hash":`) }, ErrCorrupt, `"seed"`},
		{"negative entry count", func(t *testing.T) []byte { return edit(t, `"entries": 20`, `"entries": -20`) }, ErrCorrupt, "entries"},
		{"negative file size", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Size = -1 }) }, ErrCorrupt, "files[0]"},
		// A resealed size of 2^62 reached the disk-space check and was
		// refused there (exit 3) as if the disk were too small.
		{"file size 2^62", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Size = 1 << 62 }) }, ErrCorrupt, "files[0]"},
		{"worker file size 2^62", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files[1].Size = 1 << 62 })
		}, ErrCorrupt, "1 TiB bound"},
		{"bucket count 0", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Partitioning.Buckets = 0 }) }, ErrCorrupt, "partitioning.buckets 0"},
		{"bucket count 70000", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Partitioning.Buckets = 70000 }) }, ErrCorrupt, "partitioning.buckets 70000"},
		{"unknown mapping", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Partitioning.Mapping = "jump" }) }, ErrCorrupt, "partitioning.mapping"},
		{"unknown hash", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Partitioning.Hash = "murmur3" }) }, ErrCorrupt, "partitioning.hash"},
		{"width 0", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.WidthAtWrite = 0 }) }, ErrCorrupt, "width_at_write"},
		{"bucket range outside N", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.Files[len(m.Files)-1].BucketHi = 8 })
		}, ErrCorrupt, "bucket range"},
		{"bucket range reversed", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.Files[0].BucketLo, m.Files[0].BucketHi = 1, 0 })
		}, ErrCorrupt, "files[0]"},
		{"bounds disagree with bucket range", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.Files[0].BucketHi++ })
		}, ErrCorrupt, "key bounds"},
		{"files out of order", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.Files[0], m.Files[1] = m.Files[1], m.Files[0] })
		}, ErrCorrupt, "files[1]"},
		{"files overlapping", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) {
				m.Files[1].Smallest = m.Files[0].Largest
				m.Files[1].BucketLo = m.Files[0].BucketHi
			})
		}, ErrCorrupt, "overlaps"},
		{"bounds not hex", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Smallest = "zz" }) }, ErrCorrupt, "files[0]"},
		{"empty file", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Entries = 0 }) }, ErrCorrupt, "entries"},
		{"absolute path", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "/etc/passwd.sst" }) }, ErrCorrupt, "files[0]"},
		{"dot-dot path", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "../x" }) }, ErrCorrupt, `"../x"`},
		{"dot-dot inside data", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.Files[0].Path = "data/../../x.sst" })
		}, ErrCorrupt, "files[0]"},
		{"subdirectory of data", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "data/sub/x.sst" }) }, ErrCorrupt, "data/sub/x.sst"},
		{"data file outside data", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "x.sst" }) }, ErrCorrupt, "files[0]"},
		{"data file in workers", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "workers/x.sst" }) }, ErrCorrupt, "files[0]"},
		{"backslash path", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = `data\x.sst` }) }, ErrCorrupt, "files[0]"},
		{"data file without .sst", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Path = "data/x" }) }, ErrCorrupt, ".sst"},
		{"path listed twice", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[1].Path = m.Files[0].Path }) }, ErrCorrupt, "twice"},
		{"worker file outside workers", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files[1].Path = "data/000-00001.bin" })
		}, ErrCorrupt, "worker_states[0]"},
		{"worker file in a subdirectory", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files[1].Path = "workers/a/b" })
		}, ErrCorrupt, "worker_states[0]"},
		{"worker file dot-dot", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[1].Files[0].Path = "workers/../MANIFEST.json" })
		}, ErrCorrupt, "worker_states[1]"},
		{"worker files not one per worker", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files = m.WorkerStates[0].Files[:3] })
		}, ErrCorrupt, "one per worker"},
		{"worker files misnumbered", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files[2].Worker = 3 })
		}, ErrCorrupt, "worker 3"},
		{"worker file too small for items", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.WorkerStates[0].Files[0].Items = 1000 })
		}, ErrCorrupt, "1000 items"},
		{"unknown rule", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.WorkerStates[0].Rule = "shard" }) }, ErrCorrupt, "rule"},
		{"duplicate state id", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.States[1].ID = m.States[0].ID }) }, ErrCorrupt, "states[1]"},
		{"duplicate state name", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.States[1].Step, m.States[1].Name = m.States[0].Step, m.States[0].Name })
		}, ErrCorrupt, "listed twice"},
		{"unknown kind", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.States[0].Kind = "set" }) }, ErrCorrupt, "kind"},
		{"unknown codec", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.States[0].ValueCodec = "float" }) }, ErrCorrupt, "codec"},
		{"step with slash", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.States[0].Step = "a/b" }) }, ErrCorrupt, "states[0]"},
		{"bucket_entries length", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.BucketEntries = m.BucketEntries[:7] })
		}, ErrCorrupt, "bucket_entries"},
		{"bucket counts disagree with files", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.BucketEntries[0]++ })
		}, ErrCorrupt, "bucket_entries"},
		{"bytes in an empty bucket", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) {
				m.BucketEntries[0], m.BucketEntries[1] = 0, m.BucketEntries[1]+m.BucketEntries[0]
			})
		}, ErrCorrupt, "bucket 0"},
		{"state counts disagree with files", func(t *testing.T) []byte {
			return reseal(t, func(m *Manifest) { m.States[0].Entries++ })
		}, ErrCorrupt, "states' entry counts"},
		{"checksum not hex", func(t *testing.T) []byte { return reseal(t, func(m *Manifest) { m.Files[0].Checksum = "abc" }) }, ErrCorrupt, "checksum"},
		{"edited body", func(t *testing.T) []byte { return edit(t, `"width_at_write": 4`, `"width_at_write": 2`) }, ErrCorrupt, "self-checksum"},
		{"edited checksum", func(t *testing.T) []byte {
			var m Manifest
			_ = json.Unmarshal(validManifest(t), &m)
			return edit(t, m.Checksum, strings.Repeat("0", 32))
		}, ErrCorrupt, "self-checksum"},
		{"truncated JSON", func(t *testing.T) []byte { d := validManifest(t); return d[:len(d)/2] }, ErrCorrupt, "JSON"},
		{"empty file", func(t *testing.T) []byte { return nil }, ErrCorrupt, "JSON"},
		{"data after the document", func(t *testing.T) []byte { return append(validManifest(t), "{}"...) }, ErrCorrupt, "after"},
		{"over 64 MiB", func(t *testing.T) []byte {
			d := validManifest(t)
			return append(d, bytes.Repeat([]byte(" "), MaxManifestSize)...)
		}, ErrTooLarge, "64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data(t)
			m, err := DecodeManifest(data)
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %q is not %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
			// ReadManifest agrees with DecodeManifest.
			if _, err2 := ReadManifest(bytes.NewReader(data)); !errors.Is(err2, tc.want) {
				t.Errorf("ReadManifest: %v, want %v", err2, tc.want)
			}
		})
	}
}

// TestReadManifestBound: ReadManifest stops reading one byte past the bound,
// so a huge file is refused without being read whole.
func TestReadManifestBound(t *testing.T) {
	r := &countingReader{r: io.LimitReader(zeroReader{}, 1<<40)}
	_, err := ReadManifest(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadManifest of 1 TiB: %v, want ErrTooLarge", err)
	}
	if r.n > MaxManifestSize+1 {
		t.Errorf("read %d bytes, want at most %d", r.n, MaxManifestSize+1)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestCheckRelPath(t *testing.T) {
	for _, tc := range []struct {
		p, dir, suffix string
		ok             bool
	}{
		{"data/00000-0001.sst", "data", ".sst", true},
		{"workers/000-00001.bin", "workers", "", true},
		{"data/a..b.sst", "data", ".sst", false},
		{"data/.sst", "data", ".sst", true},
		{"data/", "data", "", false},
		{"data", "data", "", false},
		{"./data/x.sst", "data", ".sst", false},
		{"data//x.sst", "data", ".sst", false},
		{"", "data", "", false},
	} {
		err := checkRelPath(tc.p, tc.dir, tc.suffix)
		if (err == nil) != tc.ok {
			t.Errorf("checkRelPath(%q, %q) = %v, want ok=%v", tc.p, tc.dir, err, tc.ok)
		}
	}
}

func TestPartitioning(t *testing.T) {
	for _, tc := range []struct {
		m    Mapping
		n    int
		want error
	}{
		{MappingMod, 1, nil}, {MappingRange, 65536, nil},
		{MappingMod, 0, ErrInvalidArgument}, {MappingRange, 65537, ErrInvalidArgument},
		{"jump", 8, ErrInvalidArgument},
	} {
		p, err := NewPartitioning(tc.m, tc.n)
		if tc.want == nil {
			if err != nil || p.Validate() != nil {
				t.Errorf("NewPartitioning(%s, %d): %v", tc.m, tc.n, err)
			}
		} else if !errors.Is(err, tc.want) {
			t.Errorf("NewPartitioning(%s, %d) = %v, want %v", tc.m, tc.n, err, tc.want)
		}
	}
	if _, err := ParseMapping("MOD"); !errors.Is(err, ErrInvalidArgument) {
		t.Error("ParseMapping is case-insensitive")
	}
	// range: the extremes of hash space map to the first and last bucket,
	// and buckets are monotone in the hash.
	for _, n := range []uint32{1, 7, 1000, 65536} {
		p := Partitioning{Hash: HashName, Mapping: MappingRange, Buckets: n}
		if p.BucketOfHash(0) != 0 || p.BucketOfHash(^uint64(0)) != n-1 {
			t.Errorf("range/%d: extremes map to %d and %d", n, p.BucketOfHash(0), p.BucketOfHash(^uint64(0)))
		}
		prev := uint32(0)
		for h := uint64(0); h < 1<<63; h += 1 << 50 {
			b := p.BucketOfHash(h)
			if b < prev {
				t.Fatalf("range/%d not monotone at %x", n, h)
			}
			prev = b
		}
	}
}

// cut_widths is a promise the reader checks: a file that holds buckets of
// two workers at a listed width is corrupt, and the list itself must be
// strictly increasing widths in range.
func TestCutWidthsChecked(t *testing.T) {
	var m Manifest
	if err := json.Unmarshal(validManifest(t), &m); err != nil {
		t.Fatal(err)
	}
	n := int(m.Partitioning.Buckets)
	// The widest width whose cuts every file respects, and the narrowest
	// one some file straddles.
	okW, badW := 0, 0
	for w := 1; w <= n && (okW == 0 || badW == 0); w++ {
		straddles := false
		for _, f := range m.Files {
			if OwnerOf(int(f.BucketLo), w, n) != OwnerOf(int(f.BucketHi), w, n) {
				straddles = true
			}
		}
		if straddles && badW == 0 {
			badW = w
		}
		if !straddles {
			okW = w
		}
	}
	if badW == 0 {
		t.Fatalf("testdata/valid.json has no file holding two buckets; the test needs one")
	}
	for _, tc := range []struct {
		widths []int
		ok     bool
	}{
		{[]int{okW}, true},
		{[]int{badW}, false},
		{[]int{0}, false},
		{[]int{okW, okW}, false},
		{[]int{MaxWidth + 1}, false},
	} {
		data := reseal(t, func(m *Manifest) { m.CutWidths = tc.widths })
		_, err := DecodeManifest(data)
		if tc.ok && err != nil {
			t.Errorf("cut_widths %v: %v", tc.widths, err)
		}
		if !tc.ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut_widths %v: %v, want ErrCorrupt", tc.widths, err)
		}
	}
	// An empty list is not the canonical form (the member is omitted).
	data := edit(t, `"width_at_write": `, `"cut_widths": [],
 "width_at_write": `)
	if _, err := DecodeManifest(data); err == nil {
		t.Fatal("an empty cut_widths was accepted")
	}
}
