package spark

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/internal/rocksdbsst"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The RocksDB state store provider keeps, per store partition directory:
//   - <v>.zip: a RocksDB checkpoint of version v (MANIFEST, CURRENT,
//     OPTIONS, an empty WAL, and Spark's "metadata" listing the SST files
//     of the version, which live in SSTs/ and are shared across versions);
//   - <v>.changelog: with changelog checkpointing, the puts and deletes of
//     version v, in the HDFS delta framing, keys and values carrying a
//     1-byte encoding version.
// Version v loads as Spark loads it: the newest zip at or below v (none:
// the empty store at 0), then every changelog above it up to v.

// rocksEncodingVersion is the byte Spark puts before every UnsafeRow key
// and value it stores in RocksDB (STATE_ENCODING_VERSION).
const rocksEncodingVersion = 0

// rocksLayout is the RocksDB provider's layout.
type rocksLayout struct {
	// delim is Spark's delimiter between merged list elements (RocksDB's
	// StringAppendOperator): "," for mergeOperatorVersion 1, none for 2.
	delim []byte
}

// RocksPartition lists the versions present in one store partition dir of
// the RocksDB provider.
type RocksPartition struct {
	Dir        string
	Zips       map[int64]bool
	Changelogs map[int64]bool
}

// ListRocksPartition lists <v>.zip and <v>.changelog in dir
// (fs.ErrNotExist if dir is missing).
func ListRocksPartition(dir string) (*RocksPartition, error) {
	zips, changelogs, err := listVersions(dir, ".zip", ".changelog")
	if err != nil {
		return nil, err
	}
	return &RocksPartition{Dir: dir, Zips: zips, Changelogs: changelogs}, nil
}

// Plan returns the files that make up version v: the newest zip at or
// below v ("" when none: the store starts empty) and the changelogs above
// it up to v. A missing changelog wraps snapshotfmt.ErrCorrupt (Spark
// fails to load the version too).
func (rp *RocksPartition) Plan(v int64) (zipPath string, changelogs []string, err error) {
	base := int64(0)
	for z := range rp.Zips {
		if z <= v && z > base {
			base = z
		}
	}
	if base > 0 {
		zipPath = filepath.Join(rp.Dir, strconv.FormatInt(base, 10)+".zip")
	}
	for x := base + 1; x <= v; x++ {
		if !rp.Changelogs[x] {
			return "", nil, fmt.Errorf("%w: %s: state version %d needs %d.changelog (or a %d.zip or later snapshot at or below %d), which does not exist",
				snapshotfmt.ErrCorrupt, rp.Dir, v, x, x, v)
		}
		changelogs = append(changelogs, filepath.Join(rp.Dir, strconv.FormatInt(x, 10)+".changelog"))
	}
	return zipPath, changelogs, nil
}

// RocksZipMetadata is Spark's "metadata" entry of a <v>.zip
// (RocksDBCheckpointMetadata).
type RocksZipMetadata struct {
	SSTFiles []struct {
		LocalFileName  string `json:"localFileName"`
		DFSSSTFileName string `json:"dfsSstFileName"`
		SizeBytes      int64  `json:"sizeBytes"`
	} `json:"sstFiles"`
	LogFiles []struct {
		LocalFileName  string `json:"localFileName"`
		DFSLogFileName string `json:"dfsLogFileName"`
		SizeBytes      int64  `json:"sizeBytes"`
	} `json:"logFiles"`
	NumKeys             int64            `json:"numKeys"`
	NumInternalKeys     int64            `json:"numInternalKeys"`
	ColumnFamilyMapping map[string]int16 `json:"columnFamilyMapping"`
	// cfRaw holds the column family fields as written (mapping, type
	// map, max id), for the empty snapshots of new partitions.
	cfRaw map[string]json.RawMessage
}

// ReadRocksZip reads and checks a <v>.zip: every entry's CRC, Spark's
// metadata, an empty WAL. It returns the metadata.
func ReadRocksZip(path string) (*RocksZipMetadata, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %v", snapshotfmt.ErrCorrupt, path, err)
	}
	defer zr.Close()
	var meta *RocksZipMetadata
	for _, f := range zr.File {
		if f.UncompressedSize64 > 64<<20 {
			return nil, fmt.Errorf("%w: %s: entry %s declares %d bytes", snapshotfmt.ErrCorrupt, path, f.Name, f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: entry %s: %v", snapshotfmt.ErrCorrupt, path, f.Name, err)
		}
		// Reading to the end checks the entry's CRC-32.
		b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: entry %s: %v", snapshotfmt.ErrCorrupt, path, f.Name, err)
		}
		switch {
		case f.Name == "metadata":
			body, ok := bytes.CutPrefix(b, []byte("v1\n"))
			if !ok {
				return nil, fmt.Errorf("%w: %s: metadata version %q (rebucket reads v1)", snapshotfmt.ErrUnsupported, path, firstLine(b))
			}
			meta = &RocksZipMetadata{}
			var all map[string]json.RawMessage
			if err := json.Unmarshal(body, meta); err != nil {
				return nil, fmt.Errorf("%w: %s: metadata: %v", snapshotfmt.ErrCorrupt, path, err)
			}
			if err := json.Unmarshal(body, &all); err != nil {
				return nil, fmt.Errorf("%w: %s: metadata: %v", snapshotfmt.ErrCorrupt, path, err)
			}
			meta.cfRaw = map[string]json.RawMessage{}
			for _, k := range []string{"columnFamilyMapping", "columnFamilyTypeMap", "maxColumnFamilyId"} {
				if v, ok := all[k]; ok {
					meta.cfRaw[k] = v
				}
			}
		case strings.HasSuffix(f.Name, ".log") && len(b) > 0:
			// Spark writes with the WAL off and flushes before the
			// checkpoint; data here would be state outside the SSTs.
			return nil, fmt.Errorf("%w: %s: RocksDB write-ahead log %s holds %d bytes (rebucket reads checkpoints whose state is all in SST files)", snapshotfmt.ErrUnsupported, path, f.Name, len(b))
		}
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: %s has no metadata entry (not a Spark RocksDB checkpoint zip)", snapshotfmt.ErrCorrupt, path)
	}
	if len(meta.LogFiles) > 0 {
		return nil, fmt.Errorf("%w: %s lists %d archived RocksDB log files (rebucket reads checkpoints whose state is all in SST files)", snapshotfmt.ErrUnsupported, path, len(meta.LogFiles))
	}
	return meta, nil
}

// openZipTables opens the SST files a zip's metadata lists, from the
// partition's SSTs/ directory, checking each one's size.
func openZipTables(dir string, meta *RocksZipMetadata) ([]*rocksdbsst.Table, []*os.File, int64, error) {
	var tables []*rocksdbsst.Table
	var files []*os.File
	var size int64
	fail := func(err error) ([]*rocksdbsst.Table, []*os.File, int64, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, 0, err
	}
	for _, s := range meta.SSTFiles {
		if s.DFSSSTFileName == "" || strings.ContainsAny(s.DFSSSTFileName, "/\\") || s.DFSSSTFileName == ".." {
			return fail(fmt.Errorf("%w: %s: SST file name %q", snapshotfmt.ErrCorrupt, dir, s.DFSSSTFileName))
		}
		p := filepath.Join(dir, "SSTs", s.DFSSSTFileName)
		f, err := os.Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("%w: %s: the snapshot lists SST %s, which does not exist", snapshotfmt.ErrCorrupt, dir, s.DFSSSTFileName))
			}
			return fail(err)
		}
		files = append(files, f)
		st, err := f.Stat()
		if err != nil {
			return fail(err)
		}
		if st.Size() != s.SizeBytes {
			return fail(fmt.Errorf("%w: %s is %d bytes, the snapshot says %d", snapshotfmt.ErrCorrupt, p, st.Size(), s.SizeBytes))
		}
		t, err := rocksdbsst.Open(f, st.Size())
		if err != nil {
			return fail(sstErr(p, err))
		}
		// The filter block is never read by a scan, but Spark's RocksDB
		// reads it on every lookup: a damaged one fails the restarted query.
		if err := t.VerifyMetaBlocks(); err != nil {
			return fail(sstErr(p, err))
		}
		if pr := t.Properties(); pr.Comparator != "" && pr.Comparator != "leveldb.BytewiseComparator" {
			return fail(fmt.Errorf("%w: %s: comparator %q", snapshotfmt.ErrUnsupported, p, pr.Comparator))
		}
		tables = append(tables, t)
		size += st.Size()
	}
	return tables, files, size, nil
}

// sstErr names the file of a table reader's error (which wraps
// snapshotfmt's ErrCorrupt or ErrUnsupported for damage).
func sstErr(path string, err error) error { return fmt.Errorf("%s: %w", path, err) }

// MergeDelimiter is the length of the delimiter between the elements of a
// RocksDB list value (0 for the HDFS-backed store, which has no lists).
func (c *Checkpoint) MergeDelimiter() int {
	if l, ok := c.layout.(rocksLayout); ok {
		return len(l.delim)
	}
	return 0
}

// ConfMergeOperatorVersion is Spark's RocksDB merge operator version.
const ConfMergeOperatorVersion = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"

// newRocksLayout reads the merge delimiter from the offsets conf: absent
// means a Spark from before the conf, which used ",".
func newRocksLayout(o *OffsetEntry) (rocksLayout, error) {
	var delim []byte
	switch v := o.Conf(ConfMergeOperatorVersion); v {
	case "", "1":
		delim = []byte(",")
	case "2":
	default:
		return rocksLayout{}, fmt.Errorf("%w: %s=%s (rebucket reads 1 and 2)", snapshotfmt.ErrUnsupported, ConfMergeOperatorVersion, v)
	}
	return rocksLayout{delim: delim}, nil
}

// stripVersion drops Spark's encoding-version byte of a stored key or
// value.
func stripVersion(b []byte, what string) ([]byte, error) {
	if len(b) == 0 || b[0] != rocksEncodingVersion {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: empty RocksDB %s", snapshotfmt.ErrCorrupt, what)
		}
		return nil, fmt.Errorf("%w: RocksDB %s has state encoding version %d (rebucket reads %d)", snapshotfmt.ErrUnsupported, what, b[0], rocksEncodingVersion)
	}
	return b[1:], nil
}

func (rocksLayout) files(dir string, v int64) ([]string, error) {
	rp, err := ListRocksPartition(dir)
	if err != nil {
		return nil, err
	}
	z, cls, err := rp.Plan(v)
	if err != nil {
		return nil, err
	}
	if z != "" {
		meta, err := ReadRocksZip(z)
		if err != nil {
			return nil, err
		}
		out := []string{z}
		for _, s := range meta.SSTFiles {
			out = append(out, filepath.Join(dir, "SSTs", s.DFSSSTFileName))
		}
		return append(out, cls...), nil
	}
	return cls, nil
}

func (l rocksLayout) loadEstimate(dir string, v int64) int64 {
	fs, err := l.files(dir, v)
	if err != nil {
		return 0
	}
	var raw int64
	for _, f := range fs {
		if strings.HasSuffix(f, ".changelog") {
			raw += rawSize(f)
		} else if strings.HasSuffix(f, ".sst") {
			if st, err := os.Stat(f); err == nil {
				raw += 3 * st.Size() // LZ4-compressed blocks
			}
		}
	}
	return 2 * raw
}

func (rocksLayout) hasVersion(dir string, v int64) bool {
	rp, err := ListRocksPartition(dir)
	return err == nil && (rp.Zips[v] || rp.Changelogs[v])
}

func (l rocksLayout) forEachRow(s *Store, dir string, v int64, fn func(key, value []byte) error) (int, int64, error) {
	if s.TWS == nil && s.NumColsPrefixKey > 0 {
		// RocksDB keeps such keys split in two rows (PrefixKeyScan), which
		// rebucket does not join back yet.
		return 0, 0, fmt.Errorf("%w: store %s with a key prefix of %d columns (a session window) in the RocksDB provider", snapshotfmt.ErrUnsupported, s.Name, s.NumColsPrefixKey)
	}
	rp, err := ListRocksPartition(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && v == 0 {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	zipPath, cls, err := rp.Plan(v)
	if err != nil {
		return 0, 0, err
	}
	var files int
	var size int64
	var tables []*rocksdbsst.Table
	if zipPath != "" {
		meta, err := ReadRocksZip(zipPath)
		if err != nil {
			return 0, 0, err
		}
		if s.TWS != nil {
			if err := s.TWS.bindIDs(meta); err != nil {
				return 0, 0, fmt.Errorf("%s: %w", zipPath, err)
			}
		} else {
			for cf := range meta.ColumnFamilyMapping {
				if cf != "default" {
					return 0, 0, fmt.Errorf("%w: %s: RocksDB column family %q in a store of an operator without column families", snapshotfmt.ErrUnsupported, zipPath, cf)
				}
			}
		}
		st, err := os.Stat(zipPath)
		if err != nil {
			return 0, 0, err
		}
		var osFiles []*os.File
		var n int64
		tables, osFiles, n, err = openZipTables(dir, meta)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", zipPath, err)
		}
		defer func() {
			for _, f := range osFiles {
				f.Close()
			}
		}()
		files += 1 + len(tables)
		size += st.Size() + n
	}
	live := func(fn func(k, v []byte) error) error {
		if len(tables) == 0 {
			return nil
		}
		return rocksdbsst.Live(tables, rocksdbsst.StringAppend(l.delim), fn)
	}
	emit := func(k, val []byte) error {
		if s.TWS != nil {
			// Kept as stored: the family id and each family's layout.
			return fn(k, val)
		}
		kk, err := stripVersion(k, "key")
		if err != nil {
			return err
		}
		vv, err := stripVersion(val, "value")
		if err != nil {
			return err
		}
		return fn(kk, vv)
	}
	if len(cls) == 0 {
		// One snapshot: its live keys are distinct, stream them.
		if err := live(emit); err != nil {
			return 0, 0, sstErr(zipPath, err)
		}
		return files, size, nil
	}
	// The changelogs' effect on the snapshot, in memory (an empty value
	// marks a delete: a stored value always has its version byte); the
	// snapshot's rows are then streamed past it. A merge needs the value
	// it appends to, so changelogs with merges load everything instead.
	for _, f := range cls {
		st, err := os.Stat(f)
		if err != nil {
			return 0, 0, err
		}
		size += st.Size()
	}
	files += len(cls)
	// A partition new to a rewritten layout (an empty snapshot and one
	// changelog of puts), or a store's first version: when the changelog
	// puts each key once and deletes and merges none, it is the state;
	// stream it (a first read checks that, cheaply, by key hashes).
	if len(tables) == 0 && len(cls) == 1 {
		unique, err := changelogPutsOnce(cls[0])
		if err != nil {
			return 0, 0, err
		}
		if unique {
			err := readChangelog(cls[0], func(_ changeOp, k, val []byte) error { return emit(k, val) })
			return files, size, err
		}
	}
	// Sized up front from the changelogs' raw bytes (a record is at least
	// about 24 bytes): growing a map of millions re-hashes it.
	var raw int64
	for _, f := range cls {
		raw += rawSize(f)
	}
	over := &table{idx: make(map[uint64]uint64, min(raw/24, 64<<20))}
	for _, f := range cls {
		err := readChangelog(f, func(op changeOp, k, val []byte) error {
			switch op {
			case changeDelete:
				over.put(k, nil)
			case changeMerge:
				return errMergeSeen
			default:
				over.put(k, val)
			}
			return nil
		})
		if errors.Is(err, errMergeSeen) {
			return files, size, l.loadWhole(zipPath, live, cls, emit)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if err := live(func(k, v []byte) error {
		if _, ok := over.get(k); ok {
			return nil
		}
		return emit(k, v)
	}); err != nil {
		return 0, 0, sstErr(zipPath, err)
	}
	if err := over.each(func(k, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		return emit(k, v)
	}); err != nil {
		return 0, 0, err
	}
	return files, size, nil
}

var errMergeSeen = errors.New("changelog merge")

// changelogPutsOnce says whether a changelog puts each key once and
// deletes and merges none.
func changelogPutsOnce(path string) (bool, error) {
	var seen hashSeen
	errNot := errors.New("not puts only")
	err := readChangelog(path, func(op changeOp, k, _ []byte) error {
		if op != changePut {
			return errNot
		}
		seen.add(xxh3.Hash(k))
		return nil
	})
	if errors.Is(err, errNot) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !seen.hasDup(), nil
}

// loadWhole loads the snapshot and the changelogs into memory and applies
// them in order (merges append to the current value), as Spark does.
func (l rocksLayout) loadWhole(zipPath string, live func(func(k, v []byte) error) error, cls []string, emit func(k, v []byte) error) error {
	rows := newTable()
	if err := live(func(k, v []byte) error { rows.put(k, v); return nil }); err != nil {
		return sstErr(zipPath, err)
	}
	for _, f := range cls {
		if err := readChangelog(f, func(op changeOp, k, val []byte) error {
			switch op {
			case changeDelete:
				rows.del(k)
			case changeMerge:
				old, ok := rows.get(k)
				if ok {
					val = slices.Concat(old, l.delim, val)
				}
				rows.put(k, val)
			default:
				rows.put(k, val)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return rows.each(emit)
}

// changeOp is the kind of a changelog record.
type changeOp uint8

const (
	changePut changeOp = iota
	changeDelete
	changeMerge
)

// Changelog v2 record types (RecordType.getRecordTypeAsByte).
const (
	recEOF    = 0x00
	recPut    = 0x01
	recDelete = 0x10
	recMerge  = 0x11
)

// changelogV2Header is writeUTF("v2"), which starts a v2 changelog (v1
// has no header: its first bytes are a key length).
var changelogV2Header = []byte{0x00, 0x02, 'v', '2'}

// readChangelog reads a <v>.changelog of version 1 (the delta framing:
// puts and deletes) or 2 (a type byte per record: put, delete, merge;
// column family stores).
func readChangelog(path string, fn func(op changeOp, key, value []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(lz4java.NewReader(bufio.NewReaderSize(f, 256<<10)), 256<<10)
	head, err := br.Peek(4)
	if err == nil && head[0] == 0 && head[1] < 8 && head[1] >= 2 && head[2] == 'v' {
		// writeUTF("vN"): a versioned changelog.
		hdr, err := br.Peek(2 + int(head[1]))
		if err != nil {
			return fmt.Errorf("%s: %w", path, truncated(err))
		}
		ver := string(hdr[2:])
		if ver != "v2" {
			return fmt.Errorf("%w: %s: changelog version %s (rebucket reads v1 and v2)", snapshotfmt.ErrUnsupported, path, ver)
		}
		br.Discard(len(hdr))
		if err := readChangelogV2(br, fn); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if _, err := ReadRecords(br, true, func(k, v []byte, deleted bool) error {
		if deleted {
			return fn(changeDelete, k, nil)
		}
		return fn(changePut, k, v)
	}); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// truncated reports a changelog that ends early as damage.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: changelog ends before its end record", snapshotfmt.ErrCorrupt)
	}
	return err
}

func readChangelogV2(br *bufio.Reader, fn func(op changeOp, key, value []byte) error) error {
	var lenBuf [4]byte
	readLen := func(what string) (int, error) {
		if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
			return 0, truncated(err)
		}
		n := int32(binary.BigEndian.Uint32(lenBuf[:]))
		if n < -1 || n > maxRecord {
			return 0, fmt.Errorf("%w: changelog %s length %d", snapshotfmt.ErrCorrupt, what, n)
		}
		return int(n), nil
	}
	var key, val []byte
	for {
		t, err := br.ReadByte()
		if err != nil {
			return truncated(err)
		}
		if t == recEOF {
			if _, err := br.ReadByte(); err != io.EOF {
				return fmt.Errorf("%w: changelog continues after its end record", snapshotfmt.ErrCorrupt)
			}
			return nil
		}
		if t != recPut && t != recDelete && t != recMerge {
			if t == 0x20 {
				return fmt.Errorf("%w: changelog delete-range record", snapshotfmt.ErrUnsupported)
			}
			return fmt.Errorf("%w: changelog record type 0x%02x", snapshotfmt.ErrCorrupt, t)
		}
		kl, err := readLen("key")
		if err != nil {
			return err
		}
		if kl < 0 {
			return fmt.Errorf("%w: changelog key length %d", snapshotfmt.ErrCorrupt, kl)
		}
		key = slices.Grow(key[:0], kl)[:kl]
		if _, err := io.ReadFull(br, key); err != nil {
			return truncated(err)
		}
		vl, err := readLen("value")
		if err != nil {
			return err
		}
		if t == recDelete {
			if vl != -1 {
				return fmt.Errorf("%w: changelog delete record with a value length %d", snapshotfmt.ErrCorrupt, vl)
			}
			if err := fn(changeDelete, key, nil); err != nil {
				return err
			}
			continue
		}
		if vl < 0 {
			return fmt.Errorf("%w: changelog value length %d", snapshotfmt.ErrCorrupt, vl)
		}
		val = slices.Grow(val[:0], vl)[:vl]
		if _, err := io.ReadFull(br, val); err != nil {
			return truncated(err)
		}
		op := changePut
		if t == recMerge {
			op = changeMerge
		}
		if err := fn(op, key, val); err != nil {
			return err
		}
	}
}

// get returns the value of key k.
func (t *table) get(k []byte) ([]byte, bool) {
	h := xxh3.Hash(k)
	if ref, ok := t.idx[h]; ok {
		if ok, _ := t.keyIs(ref, k); ok {
			_, v := t.at(ref)
			return v, true
		}
	}
	if ref, ok := t.over[string(k)]; ok {
		_, v := t.at(ref)
		return v, true
	}
	return nil, false
}
