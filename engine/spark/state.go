package spark

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// maxRecord bounds one key or value (Spark's rows are far smaller); a
// larger length is damage, not an allocation.
const maxRecord = 256 << 20

// ReadRecords reads the records of an uncompressed .delta/.snapshot
// payload: int32 BE key length, key, int32 BE value length, value; value
// length -1 is a delete (deltas only), key length -1 ends the file.
// fn's slices are valid only during the call.
func ReadRecords(r io.Reader, allowDelete bool, fn func(key, value []byte, deleted bool) error) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var n int64
	var buf []byte
	for {
		// A record that fits the buffer is handed out in place (Peek);
		// a larger one is read into buf.
		b, err := br.Peek(8)
		if len(b) < 4 {
			return n, fmt.Errorf("%w: record %d: truncated key length: %v", snapshotfmt.ErrCorrupt, n, noEOF(peekErr(err)))
		}
		kl := int32(binary.BigEndian.Uint32(b))
		if kl == -1 {
			br.Discard(4)
			break
		}
		if kl < 0 || kl > maxRecord {
			return n, fmt.Errorf("%w: record %d: key length %d", snapshotfmt.ErrCorrupt, n, kl)
		}
		head := 4 + int(kl) + 4
		if head <= br.Size() {
			b, err = br.Peek(head)
			if len(b) < head {
				if len(b) < 4+int(kl) {
					return n, fmt.Errorf("%w: record %d: truncated key: %v", snapshotfmt.ErrCorrupt, n, noEOF(peekErr(err)))
				}
				return n, fmt.Errorf("%w: record %d: truncated value length: %v", snapshotfmt.ErrCorrupt, n, noEOF(peekErr(err)))
			}
			vl := int32(binary.BigEndian.Uint32(b[head-4:]))
			if vl == -1 {
				if !allowDelete {
					return n, fmt.Errorf("%w: record %d: a delete in a snapshot", snapshotfmt.ErrCorrupt, n)
				}
				if err := fn(b[4:4+kl], nil, true); err != nil {
					return n, err
				}
				br.Discard(head)
				n++
				continue
			}
			if vl < 0 || vl > maxRecord {
				return n, fmt.Errorf("%w: record %d: value length %d", snapshotfmt.ErrCorrupt, n, vl)
			}
			if total := head + int(vl); total <= br.Size() {
				b, err = br.Peek(total)
				if len(b) < total {
					return n, fmt.Errorf("%w: record %d: truncated value: %v", snapshotfmt.ErrCorrupt, n, noEOF(peekErr(err)))
				}
				if err := fn(b[4:4+kl], b[head:total], false); err != nil {
					return n, err
				}
				br.Discard(total)
				n++
				continue
			}
		}
		// Slow path: the record is larger than the buffer.
		br.Discard(4)
		if cap(buf) < int(kl) {
			buf = make([]byte, kl, max(int(kl), 2*cap(buf)))
		}
		key := buf[:kl]
		if _, err := io.ReadFull(br, key); err != nil {
			return n, fmt.Errorf("%w: record %d: truncated key: %v", snapshotfmt.ErrCorrupt, n, noEOF(err))
		}
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return n, fmt.Errorf("%w: record %d: truncated value length: %v", snapshotfmt.ErrCorrupt, n, noEOF(err))
		}
		vl := int32(binary.BigEndian.Uint32(hdr[:]))
		if vl == -1 {
			if !allowDelete {
				return n, fmt.Errorf("%w: record %d: a delete in a snapshot", snapshotfmt.ErrCorrupt, n)
			}
			if err := fn(key, nil, true); err != nil {
				return n, err
			}
			n++
			continue
		}
		if vl < 0 || vl > maxRecord {
			return n, fmt.Errorf("%w: record %d: value length %d", snapshotfmt.ErrCorrupt, n, vl)
		}
		if cap(buf) < int(kl+vl) {
			nb := make([]byte, kl+vl)
			copy(nb, key)
			buf = nb
		}
		key = buf[:kl]
		val := buf[kl : kl+vl]
		if _, err := io.ReadFull(br, val); err != nil {
			return n, fmt.Errorf("%w: record %d: truncated value: %v", snapshotfmt.ErrCorrupt, n, noEOF(err))
		}
		if err := fn(key, val, false); err != nil {
			return n, err
		}
		n++
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			return n, fmt.Errorf("%w: bytes after the end-of-file record", snapshotfmt.ErrCorrupt)
		}
		return n, err
	}
	return n, nil
}

// peekErr is the error of a short Peek: the reader's, or EOF.
func peekErr(err error) error {
	if err == nil || err == bufio.ErrBufferFull {
		return io.EOF
	}
	return err
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendRecord appends one record (value nil and deleted: a delete).
func AppendRecord(b, key, value []byte, deleted bool) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	if deleted {
		return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// EndRecord is the end-of-file record.
var EndRecord = []byte{0xFF, 0xFF, 0xFF, 0xFF}

// ReadStateFile reads one lz4-compressed .delta or .snapshot file.
func ReadStateFile(path string, fn func(key, value []byte, deleted bool) error) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := ReadRecords(lz4java.NewReader(bufio.NewReaderSize(f, 256<<10)), strings.HasSuffix(path, ".delta") || strings.HasSuffix(path, ".changelog"), fn)
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// PartitionFiles are the versions present in one store partition dir.
type PartitionFiles struct {
	Dir       string
	Deltas    map[int64]bool
	Snapshots map[int64]bool
}

// ListPartition lists the .delta and .snapshot versions of a store
// partition directory (fs.ErrNotExist if it is missing).
func ListPartition(dir string) (*PartitionFiles, error) {
	snaps, deltas, err := listVersions(dir, ".snapshot", ".delta")
	if err != nil {
		return nil, err
	}
	return &PartitionFiles{Dir: dir, Deltas: deltas, Snapshots: snaps}, nil
}

// listVersions lists the versions of a partition directory's files named
// <v><baseExt> (snapshots) and <v><stepExt> (deltas or changelogs);
// fs.ErrNotExist if dir is missing.
func listVersions(dir, baseExt, stepExt string) (base, step map[int64]bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	base, step = map[int64]bool{}, map[int64]bool{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		for ext, m := range map[string]map[int64]bool{baseExt: base, stepExt: step} {
			if v, ok := strings.CutSuffix(e.Name(), ext); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
					m[n] = true
				}
			}
		}
	}
	return base, step, nil
}

// Plan returns the files that make up state version v, as the
// HDFS-backed provider loads it: the newest snapshot at or below v, then
// every delta above it up to v. A missing delta is an error wrapping
// snapshotfmt.ErrCorrupt (Spark: CANNOT_READ_DELTA_FILE_NOT_EXISTS).
func (pf *PartitionFiles) Plan(v int64) (snapshot string, deltas []string, err error) {
	base := int64(0)
	for s := v; s >= 1; s-- {
		if pf.Snapshots[s] {
			base = s
			snapshot = filepath.Join(pf.Dir, strconv.FormatInt(s, 10)+".snapshot")
			break
		}
		if !pf.Deltas[s] {
			return "", nil, fmt.Errorf("%w: %s: state version %d needs %d.delta (or a snapshot at or above %d), which does not exist",
				snapshotfmt.ErrCorrupt, pf.Dir, v, s, s)
		}
	}
	for d := base + 1; d <= v; d++ {
		deltas = append(deltas, filepath.Join(pf.Dir, strconv.FormatInt(d, 10)+".delta"))
	}
	return snapshot, deltas, nil
}

// LoadedState is one store partition at one version.
type LoadedState struct {
	rows  *table
	Files int
	Bytes int64 // compressed bytes read
}

// Len is the number of rows.
func (ls *LoadedState) Len() int { return ls.rows.len() }

// Each calls fn for every row, in no particular order; the slices stay
// valid as long as ls.
func (ls *LoadedState) Each(fn func(key, value []byte) error) error { return ls.rows.each(fn) }

// LoadPartition loads the state of a store partition directory at
// version v into memory, as Spark's HDFS-backed provider does.
func LoadPartition(dir string, v int64) (*LoadedState, error) {
	pf, err := ListPartition(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && v == 0 {
			return &LoadedState{rows: newTable()}, nil
		}
		return nil, err
	}
	snap, deltas, err := pf.Plan(v)
	if err != nil {
		return nil, err
	}
	ls := &LoadedState{rows: newTable()}
	files := deltas
	if snap != "" {
		files = append([]string{snap}, deltas...)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			ls.Bytes += st.Size()
		}
		_, err := ReadStateFile(f, func(k, val []byte, deleted bool) error {
			if deleted {
				ls.rows.del(k)
			} else {
				ls.rows.put(k, val)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		ls.Files++
	}
	return ls, nil
}

// ForEachRow calls fn for every row of the state of a store partition
// directory at version v. With a snapshot in the version, the snapshot is
// streamed and only the deltas above it are held in memory (see
// streamRows); so is the first delta of a version of deltas alone once a
// first read has shown it holds each key once. Otherwise the version is
// applied in memory first, as Spark does. fn's slices are valid only
// during the call. It returns the files and compressed bytes read.
func ForEachRow(dir string, v int64, fn func(key, value []byte) error) (files int, size int64, err error) {
	pf, err := ListPartition(dir)
	if err != nil {
		return 0, 0, err
	}
	mode := snapshotBase
	if snap, deltas, err := pf.Plan(v); err == nil && snap == "" && len(deltas) > 0 {
		// fn cannot be undone, so the bet streamRows makes is checked first.
		unique, err := uniqueKeys(deltas[0])
		if err != nil {
			return 0, 0, err
		}
		if unique {
			mode = checkedDelta
		}
	}
	if files, size, ok, err := streamRows(pf, v, mode, fn); ok || err != nil {
		return files, size, err
	}
	ls, err := LoadPartition(dir, v)
	if err != nil {
		return 0, 0, err
	}
	if err := ls.Each(fn); err != nil {
		return 0, 0, err
	}
	return ls.Files, ls.Bytes, nil
}

// uniqueKeys says whether the state file at path puts each key once and
// deletes none.
func uniqueKeys(path string) (bool, error) {
	var seen hashSeen
	errDel := errors.New("a delete")
	_, err := ReadStateFile(path, func(k, _ []byte, deleted bool) error {
		if deleted {
			return errDel
		}
		seen.add(xxh3.Hash(k))
		return nil
	})
	if errors.Is(err, errDel) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !seen.hasDup(), nil
}

// errBaseNotUnique: the first delta of a version without a snapshot, which
// streamRows streamed on the bet that it holds each key once, repeats or
// deletes a key; the caller must start over and load the version whole.
var errBaseNotUnique = errors.New("the first delta of the state version repeats or deletes a key")

// baseMode says which file streamRows may stream.
type baseMode int

const (
	snapshotBase baseMode = iota // only a snapshot
	betOnDelta                   // or the first delta, checked as it goes
	checkedDelta                 // or the first delta, known to hold each key once
)

// streamRows calls fn for every row of version v holding only the deltas
// above its base in memory: the base file is streamed, skipping every key
// a later delta puts or deletes (the table keeps deletes as tombstones),
// then the deltas' live rows follow. The base is the newest snapshot at or
// below v (Spark writes each key once in a snapshot). Without a snapshot it
// is the first delta when mode allows, checkedDelta, or betOnDelta as a bet: a delta may put a key
// twice or delete it, so the keys streamed from it are checked (their
// 64-bit hashes all differ, and it deletes no key that the later
// deltas do not settle); a lost bet returns errBaseNotUnique after fn has
// seen some rows. ok is false when there is nothing to stream (no snapshot
// and mode snapshotBase): the caller loads the version whole.
func streamRows(pf *PartitionFiles, v int64, mode baseMode, fn func(key, value []byte) error) (files int, size int64, ok bool, err error) {
	snap, deltas, err := pf.Plan(v)
	if err != nil {
		return 0, 0, true, err
	}
	base, isSnap := snap, true
	if base == "" {
		if mode == snapshotBase || len(deltas) == 0 {
			return 0, 0, false, nil
		}
		base, deltas, isSnap = deltas[0], deltas[1:], false
	}
	over := newTable()
	for _, f := range deltas {
		st, err := os.Stat(f)
		if err != nil {
			return 0, 0, true, err
		}
		size += st.Size()
		if _, err := ReadStateFile(f, func(k, val []byte, deleted bool) error {
			if deleted {
				over.tomb(k)
			} else {
				over.put(k, val)
			}
			return nil
		}); err != nil {
			return 0, 0, true, err
		}
		files++
	}
	st, err := os.Stat(base)
	if err != nil {
		return 0, 0, true, err
	}
	size += st.Size()
	files++
	var seen hashSeen
	_, err = ReadStateFile(base, func(k, val []byte, deleted bool) error {
		if over.len() > 0 && over.has(k) {
			return nil
		}
		if !isSnap && mode == betOnDelta {
			if deleted {
				return errBaseNotUnique
			}
			seen.add(xxh3.Hash(k))
		}
		return fn(k, val)
	})
	if err != nil {
		return 0, 0, true, err
	}
	if !isSnap && mode == betOnDelta {
		if seen.hasDup() {
			return 0, 0, true, errBaseNotUnique
		}
	}
	if err := over.each(fn); err != nil {
		return 0, 0, true, err
	}
	return files, size, true, nil
}
