package snapshotfmt

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/zeebo/xxh3"
)

// Format identity.
const (
	FormatName    = "rebucket-snapshot"
	FormatVersion = 1
	// ManifestName is the file whose presence, with matching checksums,
	// makes a snapshot complete. It is written last.
	ManifestName = "MANIFEST.json"
	// MaxManifestSize bounds the manifest; a larger one is refused unread.
	MaxManifestSize = 64 << 20
	// MaxFileSize bounds the size a manifest may list for one file. A
	// larger claim is damage, not a file: refused as ErrCorrupt before any
	// command sizes disk space or buffers by it.
	MaxFileSize = 1 << 40
	// MaxWidth is the most workers a manifest may say wrote it, and the
	// widest start the tools plan, check or locate for.
	MaxWidth = MaxBuckets * 16
	// TableFormat names the SSTable format of the data files: readable by
	// pebble/v2 and ingestible into a store at FormatDeleteSizedAndObsolete
	// or newer.
	TableFormat = "pebble/v2 sstable Pebblev4"
	DataDir     = "data"
	WorkersDir  = "workers"
)

// Kind is the shape of a keyed state.
type Kind string

const (
	KindValue Kind = "value" // one value per key
	KindMap   Kind = "map"   // one value per (key, sub-key)
	KindList  Kind = "list"  // one entry per key; the value is the encoded list
)

// Rule is how per-worker state is redistributed at a width change.
type Rule string

const (
	// RuleSplit concatenates items in order of old worker, then item; item
	// i goes to new worker i mod W.
	RuleSplit Rule = "split"
	// RuleUnion gives every new worker all items.
	RuleUnion Rule = "union"
	// RuleBroadcast gives every new worker the one copy (worker 0's file).
	RuleBroadcast Rule = "broadcast"
)

// State is one entry of the states table. IDs are local to a snapshot; a
// state is identified by (Step, Name) everywhere else.
type State struct {
	ID          uint16 `json:"id"`
	Step        string `json:"step"`
	Name        string `json:"name"`
	Kind        Kind   `json:"kind"`
	KeyCodec    string `json:"key_codec,omitempty"`
	SubKeyCodec string `json:"sub_key_codec,omitempty"`
	ValueCodec  string `json:"value_codec,omitempty"`
	// Entries is how many entries of this state the snapshot holds.
	Entries uint64 `json:"entries"`
}

// QualifiedName is STEP/NAME, the form flags and reports use.
func (s State) QualifiedName() string { return s.Step + "/" + s.Name }

// Codecs the tools know how to decode for display and the dataset view.
var KnownCodecs = map[string]bool{"": true, "bytes": true, "utf8": true, "int64": true, "json": true}

// DataFile describes one SSTable.
type DataFile struct {
	Path     string `json:"path"`
	BucketLo uint32 `json:"bucket_lo"`
	BucketHi uint32 `json:"bucket_hi"`
	// Smallest and Largest are the encoded keys, in hex.
	Smallest string `json:"smallest"`
	Largest  string `json:"largest"`
	Entries  uint64 `json:"entries"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// SmallestKey and LargestKey decode the hex bounds; the manifest was
// validated, so they do not fail.
func (f DataFile) SmallestKey() []byte { b, _ := hex.DecodeString(f.Smallest); return b }
func (f DataFile) LargestKey() []byte  { b, _ := hex.DecodeString(f.Largest); return b }

// WorkerFile is the per-worker state of one worker for one state.
type WorkerFile struct {
	Worker   int    `json:"worker"`
	Path     string `json:"path"`
	Items    uint64 `json:"items"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// WorkerState is a per-worker (non-keyed) state with its files, one per
// worker at the width of the write.
type WorkerState struct {
	Step  string       `json:"step"`
	Name  string       `json:"name"`
	Rule  Rule         `json:"rule"`
	Files []WorkerFile `json:"files"`
}

// QualifiedName is STEP/NAME.
func (s WorkerState) QualifiedName() string { return s.Step + "/" + s.Name }

// Lineage records one program that wrote or rewrote the snapshot.
type Lineage struct {
	Time        time.Time `json:"time"`
	Tool        string    `json:"tool"`
	Action      string    `json:"action"`
	FromBuckets uint32    `json:"from_buckets,omitempty"`
	FromMapping Mapping   `json:"from_mapping,omitempty"`
	ToBuckets   uint32    `json:"to_buckets"`
	ToMapping   Mapping   `json:"to_mapping"`
	Note        string    `json:"note,omitempty"`
}

// Manifest is MANIFEST.json.
type Manifest struct {
	Format       string       `json:"format"`
	Version      int          `json:"version"`
	TableFormat  string       `json:"table_format"`
	Created      time.Time    `json:"created"`
	Tool         string       `json:"tool"`
	Partitioning Partitioning `json:"partitioning"`
	WidthAtWrite int          `json:"width_at_write"`
	// CutWidths, optional, lists the widths whose workers' bucket ranges
	// the data files were cut at: no file holds buckets of two workers at
	// any of them, so a start at one ingests every file whole.
	CutWidths []int      `json:"cut_widths,omitempty"`
	States    []State    `json:"states"`
	Files     []DataFile `json:"files"`
	// BucketEntries and BucketBytes have one element per bucket; bytes are
	// logical: encoded key plus value.
	BucketEntries []uint64      `json:"bucket_entries"`
	BucketBytes   []uint64      `json:"bucket_bytes"`
	WorkerStates  []WorkerState `json:"worker_states"`
	Lineage       []Lineage     `json:"lineage"`
	// Checksum is XXH3-128 (hex) of the manifest encoded by Encode with this
	// field empty.
	Checksum string `json:"checksum"`
}

// Checksum returns the hex XXH3-128 of data, the checksum of every file.
func Checksum(data []byte) string {
	return Sum128Hex(xxh3.Hash128(data))
}

// Sum128Hex formats an XXH3-128 sum as 32 hex digits, high half first.
func Sum128Hex(u xxh3.Uint128) string {
	b := u.Bytes()
	return hex.EncodeToString(b[:])
}

// body is the canonical encoding with an empty checksum.
func (m *Manifest) body() ([]byte, error) {
	c := *m
	c.Checksum = ""
	return json.MarshalIndent(&c, "", " ")
}

// Encode seals the manifest (sets Checksum) and returns the file contents.
func (m *Manifest) Encode() ([]byte, error) {
	if m.BucketEntries == nil {
		m.BucketEntries = []uint64{}
	}
	if m.BucketBytes == nil {
		m.BucketBytes = []uint64{}
	}
	for _, s := range []*[]DataFile{&m.Files} {
		if *s == nil {
			*s = []DataFile{}
		}
	}
	body, err := m.body()
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	m.Checksum = Checksum(body)
	out, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(out, '\n'), nil
}

// ReadManifest decodes at most MaxManifestSize bytes from r.
func ReadManifest(r io.Reader) (*Manifest, error) {
	// A file's size sizes the buffer once; io.ReadAll alone would double
	// it on the way and leave up to twice the manifest allocated.
	var buf bytes.Buffer
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= MaxManifestSize {
			buf.Grow(int(fi.Size()) + bytes.MinRead)
		}
	}
	_, err := buf.ReadFrom(io.LimitReader(r, MaxManifestSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: manifest is over %d MiB", ErrTooLarge, MaxManifestSize>>20)
	}
	return DecodeManifest(data)
}

// DecodeManifest parses and validates a manifest strictly: unknown fields,
// a wrong self-checksum and every inconsistency Validate finds are errors.
func DecodeManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: manifest is %d bytes, over the %d MiB bound", ErrTooLarge, len(data), MaxManifestSize>>20)
	}
	// Read identity first so a future version gets ErrUnsupported, not a
	// confusing unknown-field error.
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: manifest is not valid JSON (torn or truncated?): %v", ErrCorrupt, err)
	}
	if head.Format != FormatName {
		return nil, fmt.Errorf("%w: manifest format %q, want %q", ErrCorrupt, head.Format, FormatName)
	}
	if head.Version != FormatVersion {
		return nil, fmt.Errorf("%w: manifest version %d; this build reads version %d", ErrUnsupported, head.Version, FormatVersion)
	}
	// One pass of encoding/json over the bytes (Unmarshal does not copy
	// them, unlike a Decoder), then one streaming pass that re-encodes the
	// result piece by piece, hashing the body and comparing it with the
	// file. Requiring the file to be exactly its canonical encoding refuses
	// what Unmarshal would let through silently: unknown members, a member
	// twice or in other letter case, another layout.
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	c := newCanon(data)
	c.encode(&m)
	if c.err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, c.err)
	}
	if got := c.sum(); got != m.Checksum {
		return nil, fmt.Errorf("%w: manifest self-checksum is %s, its body hashes to %s: it was edited or torn", ErrCorrupt, m.Checksum, got)
	}
	if c.mismatch >= 0 {
		return nil, whyNotCanonical(data, c.mismatch)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's internal consistency. Every problem is
// ErrCorrupt naming the field.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if m.Format != FormatName {
		return bad("format %q, want %q", m.Format, FormatName)
	}
	if m.Version != FormatVersion {
		return fmt.Errorf("%w: manifest version %d", ErrUnsupported, m.Version)
	}
	if m.TableFormat != TableFormat {
		return bad("table_format %q, want %q", m.TableFormat, TableFormat)
	}
	if err := m.Partitioning.Validate(); err != nil {
		return err
	}
	n := uint64(m.Partitioning.Buckets)
	if m.WidthAtWrite < 1 || m.WidthAtWrite > MaxWidth {
		return bad("width_at_write %d outside 1..%d", m.WidthAtWrite, MaxWidth)
	}
	for i, w := range m.CutWidths {
		if w < 1 || w > MaxWidth || (i > 0 && w <= m.CutWidths[i-1]) {
			return bad("cut_widths[%d] = %d: want strictly increasing widths in 1..%d", i, w, MaxWidth)
		}
	}
	if uint64(len(m.BucketEntries)) != n || uint64(len(m.BucketBytes)) != n {
		return bad("bucket_entries has %d and bucket_bytes %d elements, want one per bucket (%d)", len(m.BucketEntries), len(m.BucketBytes), n)
	}
	ids := map[uint16]bool{}
	names := map[string]bool{}
	for i, s := range m.States {
		if ids[s.ID] {
			return bad("states[%d]: id %d used twice", i, s.ID)
		}
		ids[s.ID] = true
		if s.Step == "" || s.Name == "" || strings.Contains(s.Step, "/") {
			return bad("states[%d]: step %q and name %q must be non-empty, and the step must not contain '/'", i, s.Step, s.Name)
		}
		if names[s.QualifiedName()] {
			return bad("states[%d]: %s listed twice", i, s.QualifiedName())
		}
		names[s.QualifiedName()] = true
		switch s.Kind {
		case KindValue, KindMap, KindList:
		default:
			return bad("states[%d] (%s): kind %q, want value, map or list", i, s.QualifiedName(), s.Kind)
		}
		for _, c := range []string{s.KeyCodec, s.SubKeyCodec, s.ValueCodec} {
			if !KnownCodecs[c] {
				return bad("states[%d] (%s): unknown codec %q", i, s.QualifiedName(), c)
			}
		}
	}
	paths := map[string]bool{}
	var total, sumBuckets uint64
	var prevLargest []byte
	for i, f := range m.Files {
		if err := checkRelPath(f.Path, DataDir, ".sst"); err != nil {
			return bad("files[%d]: %v", i, err)
		}
		if paths[f.Path] {
			return bad("files[%d]: %s listed twice", i, f.Path)
		}
		paths[f.Path] = true
		if f.BucketLo > f.BucketHi || uint64(f.BucketHi) >= n {
			return bad("files[%d] (%s): bucket range %d..%d outside [0, %d)", i, f.Path, f.BucketLo, f.BucketHi, n)
		}
		if f.Size < 0 || f.Entries == 0 {
			return bad("files[%d] (%s): size %d and entries %d must be positive", i, f.Path, f.Size, f.Entries)
		}
		if f.Size > MaxFileSize {
			return bad("files[%d] (%s): size %d is over the %d TiB bound of a listed file", i, f.Path, f.Size, MaxFileSize>>40)
		}
		if !isHex128(f.Checksum) {
			return bad("files[%d] (%s): checksum %q is not 32 hex digits", i, f.Path, f.Checksum)
		}
		lo, err1 := hex.DecodeString(f.Smallest)
		hi, err2 := hex.DecodeString(f.Largest)
		if err1 != nil || err2 != nil || bytes.Compare(lo, hi) > 0 {
			return bad("files[%d] (%s): key bounds are not hex or not ordered", i, f.Path)
		}
		blo, ok1 := KeyBucket(lo)
		bhi, ok2 := KeyBucket(hi)
		if !ok1 || !ok2 || blo != f.BucketLo || bhi != f.BucketHi {
			return bad("files[%d] (%s): key bounds lie in buckets %d..%d, the file claims %d..%d", i, f.Path, blo, bhi, f.BucketLo, f.BucketHi)
		}
		if prevLargest != nil && bytes.Compare(prevLargest, lo) >= 0 {
			return bad("files[%d] (%s): key range overlaps or precedes files[%d]: files must be in key order, never overlapping", i, f.Path, i-1)
		}
		for _, w := range m.CutWidths {
			if a, b := OwnerOf(int(blo), w, int(n)), OwnerOf(int(bhi), w, int(n)); a != b {
				return bad("files[%d] (%s): holds buckets %d..%d of workers %d and %d at width %d, which cut_widths says the files were cut for", i, f.Path, blo, bhi, a, b, w)
			}
		}
		prevLargest = hi
		total += f.Entries
		if total < f.Entries {
			return bad("file entry counts overflow")
		}
	}
	for b := range m.BucketEntries {
		sumBuckets += m.BucketEntries[b]
		if sumBuckets < m.BucketEntries[b] {
			return bad("bucket_entries overflow")
		}
		if m.BucketEntries[b] == 0 && m.BucketBytes[b] != 0 {
			return bad("bucket %d has 0 entries but %d bytes", b, m.BucketBytes[b])
		}
	}
	if sumBuckets != total {
		return bad("bucket_entries add up to %d, the files hold %d", sumBuckets, total)
	}
	var sumStates uint64
	for _, s := range m.States {
		sumStates += s.Entries
		if sumStates < s.Entries {
			return bad("state entry counts overflow")
		}
	}
	if sumStates != total {
		return bad("states' entry counts add up to %d, the files hold %d", sumStates, total)
	}
	wnames := map[string]bool{}
	for i, ws := range m.WorkerStates {
		if ws.Step == "" || ws.Name == "" || strings.Contains(ws.Step, "/") {
			return bad("worker_states[%d]: step %q and name %q must be non-empty", i, ws.Step, ws.Name)
		}
		if wnames[ws.QualifiedName()] {
			return bad("worker_states[%d]: %s listed twice", i, ws.QualifiedName())
		}
		wnames[ws.QualifiedName()] = true
		switch ws.Rule {
		case RuleSplit, RuleUnion, RuleBroadcast:
		default:
			return bad("worker_states[%d] (%s): rule %q, want split, union or broadcast", i, ws.QualifiedName(), ws.Rule)
		}
		if len(ws.Files) != m.WidthAtWrite {
			return bad("worker_states[%d] (%s): %d files, want one per worker at width %d", i, ws.QualifiedName(), len(ws.Files), m.WidthAtWrite)
		}
		for j, f := range ws.Files {
			if f.Worker != j {
				return bad("worker_states[%d] (%s): files[%d] is for worker %d, want %d", i, ws.QualifiedName(), j, f.Worker, j)
			}
			if err := checkRelPath(f.Path, WorkersDir, ""); err != nil {
				return bad("worker_states[%d] (%s) files[%d]: %v", i, ws.QualifiedName(), j, err)
			}
			if paths[f.Path] {
				return bad("worker_states[%d] (%s): %s listed twice", i, ws.QualifiedName(), f.Path)
			}
			paths[f.Path] = true
			if f.Size > MaxFileSize {
				return bad("worker_states[%d] (%s) files[%d]: size %d is over the %d TiB bound of a listed file", i, ws.QualifiedName(), j, f.Size, MaxFileSize>>40)
			}
			if f.Size < 0 || uint64(f.Size) < 4*f.Items {
				return bad("worker_states[%d] (%s) files[%d]: size %d cannot hold %d items", i, ws.QualifiedName(), j, f.Size, f.Items)
			}
			if !isHex128(f.Checksum) {
				return bad("worker_states[%d] (%s) files[%d]: checksum %q is not 32 hex digits", i, ws.QualifiedName(), j, f.Checksum)
			}
		}
	}
	return nil
}

// StateByID returns the state with the given id.
func (m *Manifest) StateByID(id uint16) (State, bool) {
	for _, s := range m.States {
		if s.ID == id {
			return s, true
		}
	}
	return State{}, false
}

// StateByName returns the state STEP/NAME.
func (m *Manifest) StateByName(qualified string) (State, bool) {
	for _, s := range m.States {
		if s.QualifiedName() == qualified {
			return s, true
		}
	}
	return State{}, false
}

// TotalEntries is the number of keyed entries.
func (m *Manifest) TotalEntries() uint64 {
	var t uint64
	for _, c := range m.BucketEntries {
		t += c
	}
	return t
}

// TotalBytes is the logical size (encoded keys plus values).
func (m *Manifest) TotalBytes() uint64 {
	var t uint64
	for _, c := range m.BucketBytes {
		t += c
	}
	return t
}

// DataBytes is the on-disk size of the data files.
func (m *Manifest) DataBytes() int64 {
	var t int64
	for _, f := range m.Files {
		t += f.Size
	}
	return t
}

// checkRelPath accepts only "dir/name[suffix]" with a plain file name.
func checkRelPath(p, dir, suffix string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return fmt.Errorf("path %q must be relative", p)
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not clean", p)
	}
	d, name := path.Split(p)
	if d != dir+"/" || name == "" || name == "." || name == ".." || strings.Contains(p, "..") {
		return fmt.Errorf("path %q must name a file directly inside %s/", p, dir)
	}
	if suffix != "" && !strings.HasSuffix(name, suffix) {
		return fmt.Errorf("path %q must end in %s", p, suffix)
	}
	return nil
}

func isHex128(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
