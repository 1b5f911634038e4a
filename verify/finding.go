// Package verify checks snapshots: the integrity of one (Check) and the
// key-level equality of two whatever their bucket counts and mappings
// (Equal). Both stream every finding to a caller's sink as it is found and
// never stop at the first; the command renders them.
//
// The rewrite and import pipelines reuse the per-bucket fingerprints
// (Fingerprinter, Fingerprints) to check their own output.
package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Severity of a finding. Errors fail verification; warnings are reported
// but leave the snapshot verified.
type Severity string

const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
)

// Kind names what is wrong. The set is stable: scripts match on it.
type Kind string

// Manifest kinds stop a check: without a trusted manifest nothing else can
// be checked (the command exits 2, "could not run").
const (
	ManifestMissing      Kind = "manifest_missing"      // no MANIFEST.json (or no directory)
	ManifestTorn         Kind = "manifest_torn"         // not a JSON manifest: truncated, torn, unknown fields
	ManifestChecksum     Kind = "manifest_checksum"     // its self-checksum does not match: edited or torn
	ManifestInconsistent Kind = "manifest_inconsistent" // self-consistent checksum, but fields disagree (overlapping files, bad paths, counts)
	ManifestUnsupported  Kind = "manifest_unsupported"  // a format version this build does not read
	ManifestTooLarge     Kind = "manifest_too_large"    // above the 64 MiB bound
	ManifestUnreadable   Kind = "manifest_unreadable"   // an I/O error reading it
)

// File kinds (data and per-worker state files).
const (
	FileMissing     Kind = "file_missing"     // listed but absent
	FileNotRegular  Kind = "file_not_regular" // a symlink, directory or device where a file is listed
	FileSize        Kind = "file_size"        // size differs from the manifest
	FileChecksum    Kind = "file_checksum"    // whole-file checksum differs: the file is damaged (Pebble never opens it)
	FileUnreadable  Kind = "file_unreadable"  // an I/O error while reading
	UnlistedFile    Kind = "unlisted_file"    // a file in data/ or workers/ that the manifest does not list (warning)
	TableCorrupt    Kind = "table_corrupt"    // the SSTable passed its checksum yet Pebble cannot read it (a crafted or truncated table)
	FileEntries     Kind = "file_entries"     // the file holds another number of entries than listed
	WorkerItems     Kind = "worker_items"     // a per-worker state file that does not decode, or holds another item count
	WorkerStateDiff Kind = "worker_state"     // Equal: per-worker state differs
)

// Entry kinds, from the deep scan.
const (
	KeyOrder         Kind = "key_order"          // keys not strictly increasing within a file
	KeyDecode        Kind = "key_decode"         // an encoded key that does not decode, or a sub-key on a state that has none
	EntryKind        Kind = "entry_kind"         // a deletion or merge record: only sets belong in a snapshot
	ListEncoding     Kind = "list_encoding"      // a list state's value that is not the item encoding (FORMAT.md section 5)
	UnknownState     Kind = "unknown_state"      // state id not in the states table
	WrongBucket      Kind = "wrong_bucket"       // the key hashes to another bucket than the one it is stored under
	OutsideFileRange Kind = "outside_file_range" // an entry outside its file's declared key or bucket range
	DuplicateKey     Kind = "duplicate_key"      // one encoded key stored in two files
	BucketStats      Kind = "bucket_stats"       // a bucket's entries or bytes differ from the manifest
	StateStats       Kind = "state_stats"        // a state's entry count differs from the manifest
)

// Width kinds.
const (
	WidthAboveBuckets Kind = "width_above_buckets" // --width W > N: the start cannot own state with W workers under reject
)

// Equality kinds.
const (
	Missing   Kind = "missing"   // in SOURCE only
	Extra     Kind = "extra"     // in TARGET only (or more often in TARGET)
	Changed   Kind = "changed"   // same (step, state, key, sub-key), another value
	Misplaced Kind = "misplaced" // a TARGET entry stored in a bucket its key does not hash to
)

// Finding is one problem. Bucket is -1 when the finding is not about one
// bucket. Key and SubKey are hex; KeyText and SubKeyText are set when the
// state's codec hint is utf8 and the bytes are valid UTF-8.
type Finding struct {
	Kind       Kind     `json:"kind"`
	Severity   Severity `json:"severity"`
	File       string   `json:"file,omitempty"`
	Bucket     int64    `json:"bucket"`
	State      string   `json:"state,omitempty"`
	Key        string   `json:"key,omitempty"`
	KeyText    string   `json:"key_text,omitempty"`
	SubKey     string   `json:"sub_key,omitempty"`
	SubKeyText string   `json:"sub_key_text,omitempty"`
	Message    string   `json:"message"`
}

// String is the human line of a finding.
func (f Finding) String() string {
	s := fmt.Sprintf("%-7s %s", f.Severity, f.Kind)
	if f.File != "" {
		s += " " + f.File
	}
	if f.Bucket >= 0 {
		s += fmt.Sprintf(" bucket %d", f.Bucket)
	}
	if f.State != "" {
		s += " " + f.State
	}
	if f.Key != "" || f.KeyText != "" {
		if f.KeyText != "" {
			s += fmt.Sprintf(" key %q", f.KeyText)
		} else {
			s += " key " + f.Key
		}
		if f.SubKeyText != "" {
			s += fmt.Sprintf(" sub-key %q", f.SubKeyText)
		} else if f.SubKey != "" {
			s += " sub-key " + f.SubKey
		}
	}
	return s + ": " + f.Message
}

// Sink receives findings. Check and Equal call it from one goroutine at a
// time.
type Sink func(Finding)

func newFinding(kind Kind, sev Severity, format string, args ...any) Finding {
	return Finding{Kind: kind, Severity: sev, Bucket: -1, Message: fmt.Sprintf(format, args...)}
}

// withKey names the key (and sub-key) of an entry of state st.
func (f Finding) withKey(st *snapshotfmt.State, key, sub []byte, hasSub bool) Finding {
	f.Key = hex.EncodeToString(key)
	if hasSub {
		f.SubKey = hex.EncodeToString(sub)
		if f.SubKey == "" {
			f.SubKey = `""`
		}
	}
	if st != nil {
		f.State = st.QualifiedName()
		if st.KeyCodec == "utf8" && utf8.Valid(key) {
			f.KeyText = string(key)
		}
		if hasSub && st.SubKeyCodec == "utf8" && utf8.Valid(sub) {
			f.SubKeyText = string(sub)
		}
	}
	return f
}

// ErrNotEqual marks an output that was proved different from what it
// should hold (a rewrite's or import's self-check); the findings that name
// the differences went to the caller's Sink.
var ErrNotEqual = errors.New("output differs from its source")
