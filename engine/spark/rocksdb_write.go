package spark

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// A RocksDB checkpoint is rewritten without writing any RocksDB file:
// version B+1 of every new partition is a changelog, which Spark replays
// on load whether or not the restarted query has changelog checkpointing
// on (RocksDB.loadWithoutCheckpointId replays changelogs above the newest
// snapshot regardless).
//   - A partition that existed (q < N) keeps its history: <B+1>.changelog
//     deletes the keys that leave it and puts the keys that arrive.
//   - A new partition (q >= N) gets an empty snapshot <B>.zip and every
//     row in <B+1>.changelog. The zip holds only Spark's metadata (no SST):
//     Spark opens the unzipped directory with createIfMissing, which gives
//     the empty store. The alternative, empty changelogs 1..B, also loads
//     but costs two files per batch id per new partition (2.4 million
//     files for a 2 -> 8 rewrite at batch 200,000); one zip is constant.
// Skipped uncommitted batches get empty changelogs in the old partitions
// too, so versions C+2..B replay as no change.

// appendRocksRecord appends a changelog record whose key and value carry
// Spark's encoding-version byte.
func appendRocksRecord(b, key, value []byte, deleted bool) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)+1))
	b = append(b, rocksEncodingVersion)
	b = append(b, key...)
	if deleted {
		return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)+1))
	b = append(b, rocksEncodingVersion)
	return append(b, value...)
}

// appendChangeV2 appends a v2 changelog record (a column family store:
// key and value as stored, ids and version bytes included).
func appendChangeV2(b, key, value []byte, deleted bool) []byte {
	if deleted {
		b = append(b, recDelete)
	} else {
		b = append(b, recPut)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	if deleted {
		return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// changelogFormat is how a store's changelogs are written: v1 (key and
// value UnsafeRows get Spark's version byte) or, for a store with column
// families, v2 (a header, typed records, a 0x00 end).
type changelogFormat struct {
	append func(b, key, value []byte, deleted bool) []byte
	header []byte
	end    []byte
}

func changelogFormatOf(s *Store) changelogFormat {
	if s.TWS != nil {
		return changelogFormat{append: appendChangeV2, header: changelogV2Header, end: []byte{recEOF}}
	}
	return changelogFormat{append: appendRocksRecord}
}

func (cf changelogFormat) create(path string) (*snapWriter, error) {
	w, err := newSnapWriter(path)
	if err != nil {
		return nil, err
	}
	w.end = cf.end
	if len(cf.header) > 0 {
		if err := w.write(cf.header); err != nil {
			w.f.Close()
			return nil, err
		}
	}
	return w, nil
}

// writeEmpty writes a changelog with no record (and its .crc).
func (cf changelogFormat) writeEmpty(path string) (int64, error) {
	w, err := cf.create(path)
	if err != nil {
		return 0, err
	}
	n, err := w.finish()
	if err != nil {
		w.f.Close()
	}
	return n, err
}

// emptyRocksZipMetadata is the metadata entry of an empty snapshot, in
// the fields every Spark version with the RocksDB provider reads.
const emptyRocksZipMetadata = "v1\n{\"sstFiles\":[],\"numKeys\":0}"

// writeEmptyRocksZip writes a <v>.zip holding only the metadata of an
// empty store (and its Hadoop .crc); a column family store's metadata
// carries the family ids, which the changelog's keys start with.
func writeEmptyRocksZip(path string, s *Store) (int64, error) {
	meta := []byte(emptyRocksZipMetadata)
	if s.TWS != nil {
		var err error
		if meta, err = s.TWS.emptyZipMetadata(); err != nil {
			return 0, err
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("metadata")
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(meta); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	return int64(buf.Len()), writeFileCRC(path, buf.Bytes())
}

// prepareRocksPartition makes the copy's partition dir q ready for
// version `version`: a new partition's dir is emptied (a directory left
// at q >= N by an earlier, wider layout holds no state of this one: Spark
// ignores it) and given an empty snapshot at version-1; an old one gets
// empty changelogs committed+1..version-1 (skipped uncommitted batches).
// Files above the committed version were written by a batch that never
// committed: with skip (--skip-uncommitted) they are dropped from the copy,
// as that batch's changes are not part of the state; without, refused.
func prepareRocksPartition(s *Store, dir, srcDir string, q, n int, committed, version int64, skip bool) (int64, error) {
	if q >= n {
		if err := os.RemoveAll(dir); err != nil {
			return 0, err
		}
		return writeEmptyRocksZip(filepath.Join(dir, strconv.FormatInt(version-1, 10)+".zip"), s)
	}
	rp, err := ListRocksPartition(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if rp != nil {
		for ext, vs := range map[string]map[int64]bool{".zip": rp.Zips, ".changelog": rp.Changelogs} {
			for x := range vs {
				if x <= committed {
					continue
				}
				if !skip {
					return 0, fmt.Errorf("%w: %s holds %d%s, above the committed state version %d (left by an abandoned batch?); rerun the query once so it commits", snapshotfmt.ErrRefused, srcDir, x, ext, committed)
				}
				name := filepath.Join(dir, strconv.FormatInt(x, 10)+ext)
				if err := os.Remove(name); err != nil {
					return 0, err
				}
				if err := os.Remove(crcPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return 0, err
				}
			}
		}
	}
	var total int64
	for x := committed + 1; x < version; x++ {
		n, err := changelogFormatOf(s).writeEmpty(filepath.Join(dir, strconv.FormatInt(x, 10)+".changelog"))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// rewriteRocksStore writes version `version` of store s in every new
// partition as changelogs (see above).
func rewriteRocksStore(ctx context.Context, c *Checkpoint, op *Operator, s *Store, tmp string, m int, version int64, gate *memGate, opts RewriteOptions) (*Fingerprint, int64, error) {
	rel, err := filepath.Rel(c.Dir, op.Dir)
	if err != nil {
		return nil, 0, err
	}
	newOpDir := filepath.Join(tmp, rel)
	committed := c.StateVersion()
	format := changelogFormatOf(s)
	var written int64
	ws := make([]*snapWriter, m)
	defer func() {
		for _, w := range ws {
			if w != nil && w.f != nil {
				w.f.Close()
			}
		}
	}()
	for q := range m {
		dir := s.Dir(newOpDir, q)
		n, err := prepareRocksPartition(s, dir, s.Dir(op.Dir, q), q, c.Partitions, committed, version, opts.SkipUncommitted)
		if err != nil {
			return nil, 0, err
		}
		written += n
		if ws[q], err = format.create(filepath.Join(dir, strconv.FormatInt(version, 10)+".changelog")); err != nil {
			return nil, 0, err
		}
	}
	fp, err := routeRows(ctx, c, op, s, ws, gate, opts,
		func(p int, row func(k, v []byte) error) (int64, error) {
			_, size, err := c.layout.forEachRow(s, s.Dir(op.Dir, p), committed, row)
			return size, err
		},
		func(bufs [][]byte, p, q int, k, v []byte) {
			if q == p {
				return // stays where it is
			}
			bufs[q] = format.append(bufs[q], k, v, false)
			if p < len(bufs) {
				bufs[p] = format.append(bufs[p], k, nil, true)
			}
		})
	if err != nil {
		return nil, 0, err
	}
	n, err := finishAll(ws)
	if err != nil {
		return nil, 0, err
	}
	return fp, written + n, nil
}
