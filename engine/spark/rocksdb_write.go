package spark

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// A RocksDB checkpoint is rewritten without writing any RocksDB file:
// version B+1 of every new partition is a changelog, which Spark replays
// on load whether or not the restarted query has changelog checkpointing
// on (RocksDB.loadWithoutCheckpointId replays changelogs above the newest
// snapshot regardless).
//   - A partition that existed (q < N) keeps its history: <B+1>.changelog
//     deletes the keys that leave it and puts the keys that arrive.
//   - A new partition (q >= N) has no snapshot: Spark starts it empty at
//     version 0 and replays 1..B+1, so it gets empty changelogs 1..B and
//     every row in <B+1>.changelog.
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

// writeEmptyChangelog writes a changelog with no record (and its .crc).
func writeEmptyChangelog(path string) (int64, error) {
	w, err := newSnapWriter(path)
	if err != nil {
		return 0, err
	}
	n, err := w.finish()
	if err != nil {
		w.f.Close()
	}
	return n, err
}

// prepareRocksPartition makes the copy's partition dir q ready for
// version `version`: a new partition's dir is emptied (a directory left
// at q >= N by an earlier, wider layout holds no state of this one: Spark
// ignores it) and given empty changelogs 1..version-1; an old one must
// hold nothing above the committed version and gets empty changelogs
// committed+1..version-1.
func prepareRocksPartition(dir string, q, n int, committed, version int64) (int64, error) {
	from := committed + 1
	if q >= n {
		if err := os.RemoveAll(dir); err != nil {
			return 0, err
		}
		from = 1
	} else {
		rp, err := ListRocksPartition(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		if rp != nil {
			for x := range rp.Zips {
				if x > committed {
					return 0, fmt.Errorf("%w: %s holds %d.zip, above the committed state version %d (left by an abandoned batch?); rerun the query once so it commits", snapshotfmt.ErrRefused, dir, x, committed)
				}
			}
			for x := range rp.Changelogs {
				if x > committed {
					return 0, fmt.Errorf("%w: %s holds %d.changelog, above the committed state version %d (left by an abandoned batch?); rerun the query once so it commits", snapshotfmt.ErrRefused, dir, x, committed)
				}
			}
		}
	}
	var total int64
	for x := from; x < version; x++ {
		n, err := writeEmptyChangelog(filepath.Join(dir, strconv.FormatInt(x, 10)+".changelog"))
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
		n, err := prepareRocksPartition(dir, q, c.Partitions, committed, version)
		if err != nil {
			return nil, 0, err
		}
		written += n
		if ws[q], err = newSnapWriter(filepath.Join(dir, strconv.FormatInt(version, 10)+".changelog")); err != nil {
			return nil, 0, err
		}
	}
	fp := &Fingerprint{}
	var fpMu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Parallelism)
	const flushAt = 64 << 10
	for p := 0; p < c.Partitions; p++ {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			dir := s.Dir(op.Dir, p)
			held, err := gate.acquire(gctx, c.layout.loadEstimate(dir, committed))
			if err != nil {
				return err
			}
			defer gate.release(held)
			bufs := make([][]byte, m)
			flush := func(q int) error {
				if len(bufs[q]) >= flushAt {
					if err := ws[q].write(bufs[q]); err != nil {
						return err
					}
					bufs[q] = bufs[q][:0]
				}
				return nil
			}
			var local Fingerprint
			_, size, err := c.layout.forEachRow(dir, committed, func(k, v []byte) error {
				r, err := unsaferow.NewRow(k, len(s.KeySchema.Fields))
				if err != nil {
					return err
				}
				h, err := sparkhash.HashRow(s.KeySchema, r, s.KeyCols, sparkhash.Seed)
				if err != nil {
					return fmt.Errorf("key %x: %w", k, err)
				}
				if old := sparkhash.Pmod(h, c.Partitions); old != p {
					return fmt.Errorf("%w: partition %d holds key %s, which Spark's rule puts in partition %d: the query does not partition its state as rebucket expects", snapshotfmt.ErrRefused, p, showKey(s, string(k)), old)
				}
				local.add(k, v)
				q := sparkhash.Pmod(h, m)
				if q == p {
					return nil // stays where it is
				}
				bufs[q] = appendRocksRecord(bufs[q], k, v, false)
				if err := flush(q); err != nil {
					return err
				}
				if p < m {
					bufs[p] = appendRocksRecord(bufs[p], k, nil, true)
					return flush(p)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			for q, b := range bufs {
				if len(b) > 0 {
					if err := ws[q].write(b); err != nil {
						return err
					}
				}
			}
			fpMu.Lock()
			fp.Merge(local)
			fpMu.Unlock()
			opts.Progress.Add(size)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for q, w := range ws {
		n, err := w.finish()
		if err != nil {
			return nil, 0, err
		}
		ws[q].f = nil
		written += n
	}
	return fp, written, nil
}
