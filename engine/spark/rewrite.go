package spark

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// RewriteOptions tune Rewrite.
type RewriteOptions struct {
	// Partitions is M, the new state partition count. Required.
	Partitions int
	// SkipUncommitted accepts offsets entries newer than the last commit
	// with Spark's own semantics for an abandoned batch (its repartition
	// tool's enforceExactlyOnceSink=false): they get commits (copies of the
	// last commit), the new batch starts after them, and the state is the
	// committed one, so their input is not reprocessed.
	SkipUncommitted bool
	// Memory bounds the state partitions read at once, by their estimated
	// size (default plan.DefaultMemory()). A partition is streamed, holding
	// only the deltas above its snapshot (or above its first delta, plus 8
	// bytes a row of that delta); one that cannot be streamed is loaded
	// whole, as Spark holds it. One larger than Memory is read alone.
	Memory int64
	// TmpDir is unused: the new checkpoint is written beside the target.
	TmpDir string
	// Parallelism is the number of partitions loaded at once (default
	// GOMAXPROCS).
	Parallelism int
	Progress    Progress
}

// RewriteResult says what Rewrite did.
type RewriteResult struct {
	Source         string            `json:"source"`
	Target         string            `json:"target"`
	FromPartitions int               `json:"from_partitions"`
	Partitions     int               `json:"partitions"`
	LastCommitted  int64             `json:"last_committed_batch"`
	Skipped        []int64           `json:"skipped_uncommitted_batches,omitempty"`
	NewBatch       int64             `json:"new_batch"`
	StateVersion   int64             `json:"state_version"`
	Operators      []RewriteOperator `json:"operators"`
	Rows           uint64            `json:"rows"`
	Verified       bool              `json:"verified"`
}

// RewriteOperator is one rewritten operator.
type RewriteOperator struct {
	ID     int      `json:"id"`
	Name   string   `json:"name"`
	Stores []string `json:"stores"`
	Rows   uint64   `json:"rows"`
	Bytes  int64    `json:"bytes"` // compressed snapshot bytes written
}

// TempPrefix starts the name of Rewrite's temporary directory beside the
// target.
const TempPrefix = ".rebucket-spark-"

// Rewrite writes a copy of the checkpoint src into the new directory dst
// with its state in opts.Partitions partitions, shaped as Spark's own
// repartition tool shapes it: with C the last committed batch and B = C+1
// (after any skipped uncommitted batches), every operator and store gets
// state version B+1 as a <B+1>.snapshot in every partition 0..M-1 (empty
// ones too), each row in partition pmod(murmur3(partition key), M);
// offsets/B is offsets/C with only the partition-count confs changed;
// commits/B is a copy of commits/C. Everything else is copied byte for
// byte, new files get Hadoop .crc side files. The result is verified
// (every row in its partition, the same rows per operator and store) and
// then published by renaming a temporary directory beside dst. src is
// only read.
func Rewrite(ctx context.Context, src, dst string, opts RewriteOptions) (*RewriteResult, error) {
	m := opts.Partitions
	if m < 1 {
		return nil, fmt.Errorf("%w: %d partitions: give 1 or more", snapshotfmt.ErrInvalidArgument, m)
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	c, err := Open(src)
	if err != nil {
		return nil, err
	}
	res := &RewriteResult{Source: src, Target: dst, FromPartitions: c.Partitions, Partitions: m, LastCommitted: c.LastCommitted}
	if un := c.Uncommitted(); len(un) > 0 {
		if !opts.SkipUncommitted {
			hint := ""
			if c.noNewData(un) {
				hint = fmt.Sprintf(" Its source offsets equal batch %d's, so it reads no new data (a no-data batch, or one left by Spark's own repartition tool: STREAMING_UNFINISHED_REPARTITION_DETECTED); --skip-uncommitted loses no input.", c.LastCommitted)
			}
			return nil, fmt.Errorf("%w: batch %d has offsets but no commit (the query stopped mid-batch); rerun the query once so it commits, or pass --skip-uncommitted to mark it committed as Spark's own repartition tool does (enforceExactlyOnceSink=false): the state stays at batch %d and that batch's input is not processed into it.%s", snapshotfmt.ErrRefused, un[len(un)-1], c.LastCommitted, hint)
		}
		res.Skipped = un
	}
	if m == c.Partitions {
		return nil, fmt.Errorf("%w: the checkpoint already has %d state partitions", snapshotfmt.ErrRefused, m)
	}
	for _, op := range c.Operators {
		if op.Unsupported != "" {
			return nil, fmt.Errorf("%w: state/%d: rebucket cannot rewrite %s yet (it rewrites streaming aggregations, dropDuplicates, session windows, flatMapGroupsWithState and stream-stream joins)", snapshotfmt.ErrUnsupported, op.ID, op.Unsupported)
		}
		for _, s := range op.Stores {
			if s.TWS == nil { // a TWS grouping key is checked when its schema is read
				if err := sparkhash.Supported(s.KeySchema); err != nil {
					return nil, fmt.Errorf("state/%d store %s: %w", op.ID, s.Name, err)
				}
			}
			for p := 0; p < c.Partitions; p++ {
				if _, err := os.Stat(s.Dir(op.Dir, p)); err != nil {
					return nil, fmt.Errorf("%w: state/%d store %s: partition directory %d of %d is missing (%v)", snapshotfmt.ErrCorrupt, op.ID, s.Name, p, c.Partitions, err)
				}
			}
		}
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("%w: target %s exists; give a new directory", snapshotfmt.ErrRefused, dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := fsx.CheckDisjoint(dst, src); err != nil {
		return nil, err
	}
	absDst, err := filepath.Abs(dst)
	if err != nil {
		return nil, err
	}
	base := c.Offset
	if len(res.Skipped) > 0 {
		raw, err := os.ReadFile(filepath.Join(c.Dir, "offsets", strconv.FormatInt(c.LastOffset, 10)))
		if err != nil {
			return nil, err
		}
		if base, err = parseOffset(c.LastOffset, raw); err != nil {
			return nil, err
		}
	}
	newOffsets, err := base.WithPartitions(m)
	if err != nil {
		return nil, err
	}
	res.NewBatch = base.Batch + 1
	res.StateVersion = res.NewBatch + 1

	// The copy is staged in a run directory beside the target, locked for
	// this run's life (fsx.MkdirRun): a run killed before it published
	// leaves one that this and every later run into the same parent
	// removes (fsx.RemoveStale; a live run's is left alone). The staged
	// checkpoint is a child of it, so the lock file never reaches dst.
	parent := filepath.Dir(absDst)
	fsx.RemoveStale(nil, parent, TempPrefix)
	runDir, err := fsx.MkdirRun(nil, parent, TempPrefix, 0o700)
	if err != nil {
		return nil, fmt.Errorf("create temporary directory beside the target: %w", err)
	}
	defer runDir.Remove()
	tmp := filepath.Join(runDir.Path, "checkpoint")
	if err := copyTree(ctx, c.Dir, tmp); err != nil {
		return nil, fmt.Errorf("copying the checkpoint: %w", err)
	}
	// Files of versions the new ones would collide with cannot exist in a
	// clean copy, but a leftover from an abandoned batch could: refuse
	// rather than shadow it.
	total := c.stateBytes(c.StateVersion())
	opts.Progress.Start(total, "rewriting Spark state")
	srcFP := map[string]*Fingerprint{}
	gate := newMemGate(opts.Memory)
	for _, op := range c.Operators {
		ro := RewriteOperator{ID: op.ID, Name: op.Name}
		for _, s := range op.Stores {
			write := rewriteStore
			if c.Provider == RocksDBProvider {
				write = rewriteRocksStore
			}
			fp, n, err := write(ctx, c, op, s, tmp, m, res.StateVersion, gate, opts)
			if err != nil {
				opts.Progress.Finish()
				return nil, fmt.Errorf("state/%d store %s: %w", op.ID, s.Name, err)
			}
			srcFP[fpKey(op, s)] = fp
			ro.Stores = append(ro.Stores, s.Name)
			ro.Rows += fp.Rows
			ro.Bytes += n
			res.Rows += fp.Rows
		}
		res.Operators = append(res.Operators, ro)
	}
	opts.Progress.Finish()
	// transformWithState: the operator metadata of batch B says M and
	// names the copy's own schema files, as Spark's tool writes it.
	for _, op := range c.Operators {
		if op.MetadataVersion != 2 {
			continue
		}
		if err := writeV2Metadata(c, op, tmp, absDst, m, res.NewBatch); err != nil {
			return nil, fmt.Errorf("state/%d: %w", op.ID, err)
		}
	}
	// offsets/B, then commits/B (and commits for skipped batches), as
	// Spark's tool orders them.
	if err := writeFileCRC(filepath.Join(tmp, "offsets", strconv.FormatInt(res.NewBatch, 10)), newOffsets); err != nil {
		return nil, err
	}
	for _, b := range append(res.Skipped, res.NewBatch) {
		if err := writeFileCRC(filepath.Join(tmp, "commits", strconv.FormatInt(b, 10)), c.Commit); err != nil {
			return nil, err
		}
	}
	if err := selfVerify(ctx, tmp, m, res, srcFP, opts); err != nil {
		return nil, err
	}
	res.Verified = true
	if err := syncTree(tmp); err != nil {
		return nil, err
	}
	if err := syncDirs(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, absDst); err != nil {
		return nil, err
	}
	if err := fsx.SyncDir(nil, filepath.Dir(absDst)); err != nil {
		return nil, err
	}
	return res, nil
}

// noNewData says whether the offsets entries of batches bs hold the same
// source offsets as offsets/C.
func (c *Checkpoint) noNewData(bs []int64) bool {
	for _, b := range bs {
		raw, err := os.ReadFile(filepath.Join(c.Dir, "offsets", strconv.FormatInt(b, 10)))
		if err != nil {
			return false
		}
		o, err := parseOffset(b, raw)
		if err != nil || !bytes.Equal(o.Sources(), c.Offset.Sources()) {
			return false
		}
	}
	return true
}

// selfVerify re-reads the new checkpoint: it must open with M partitions
// at the new batch, every row in its partition, no finding, and the same
// rows per operator and store as the source.
func selfVerify(ctx context.Context, dir string, m int, res *RewriteResult, srcFP map[string]*Fingerprint, opts RewriteOptions) error {
	nc, err := Open(dir)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	if nc.Partitions != m || nc.LastCommitted != res.NewBatch || len(nc.Uncommitted()) > 0 {
		return fmt.Errorf("%w: self-check: new checkpoint says %d partitions at batch %d", snapshotfmt.ErrCorrupt, nc.Partitions, nc.LastCommitted)
	}
	rep, err := nc.Scan(ctx, ScanOptions{Parallelism: opts.Parallelism, Memory: opts.Memory, CheckKeys: true})
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	if rep.FindingsTotal > 0 {
		return fmt.Errorf("%w: self-check: %d findings, first: %s", snapshotfmt.ErrCorrupt, rep.FindingsTotal, rep.Findings[0])
	}
	for k, f := range srcFP {
		if g := rep.fp[k]; g == nil || *g != *f {
			return fmt.Errorf("%w: self-check: state %s differs from the source after rewriting", snapshotfmt.ErrCorrupt, k)
		}
	}
	if len(rep.fp) != len(srcFP) {
		return fmt.Errorf("%w: self-check: %d stores, source has %d", snapshotfmt.ErrCorrupt, len(rep.fp), len(srcFP))
	}
	return nil
}

// snapWriter is one new partition's <v>.snapshot being written.
type snapWriter struct {
	mu   sync.Mutex
	path string
	f    *os.File
	crc  *crcWriter
	bw   *bufio.Writer
	z    *lz4java.Writer
	end  []byte // the end record (nil: EndRecord)
}

func newSnapWriter(path string) (*snapWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%w: %s already exists (left by an abandoned batch?); remove it or rerun the query once", snapshotfmt.ErrRefused, path)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	w := &snapWriter{path: path, f: f, crc: newCRCWriter(f)}
	w.bw = bufio.NewWriterSize(w.crc, 256<<10)
	w.z = lz4java.NewWriter(w.bw, lz4java.DefaultBlockSize)
	return w, nil
}

func (w *snapWriter) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.z.Write(b)
	return err
}

func (w *snapWriter) finish() (int64, error) {
	end := w.end
	if end == nil {
		end = EndRecord
	}
	if _, err := w.z.Write(end); err != nil {
		return 0, err
	}
	if err := w.z.Close(); err != nil {
		return 0, err
	}
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	if err := w.f.Close(); err != nil {
		return 0, err
	}
	if err := os.Remove(crcPath(w.path)); err != nil && !os.IsNotExist(err) {
		return 0, err
	}
	return w.z.Written(), writeNew(crcPath(w.path), w.crc.side())
}

// rewriteStore reads every old partition at the committed version and
// groups its rows into the M new snapshots. It first streams each
// partition (streamRows, betting that a version without a snapshot starts
// with a delta that holds each key once); if a bet is lost it removes what
// it wrote and starts over loading each partition whole.
func rewriteStore(ctx context.Context, c *Checkpoint, op *Operator, s *Store, tmp string, m int, version int64, gate *memGate, opts RewriteOptions) (*Fingerprint, int64, error) {
	fp, n, err := rewriteStoreOnce(ctx, c, op, s, tmp, m, version, gate, opts, true)
	if errors.Is(err, errBaseNotUnique) {
		fp, n, err = rewriteStoreOnce(ctx, c, op, s, tmp, m, version, gate, opts, false)
	}
	return fp, n, err
}

func rewriteStoreOnce(ctx context.Context, c *Checkpoint, op *Operator, s *Store, tmp string, m int, version int64, gate *memGate, opts RewriteOptions, stream bool) (*Fingerprint, int64, error) {
	rel, err := filepath.Rel(c.Dir, op.Dir)
	if err != nil {
		return nil, 0, err
	}
	newOpDir := filepath.Join(tmp, rel)
	ws := make([]*snapWriter, m)
	done := false
	defer func() {
		for _, w := range ws {
			if w != nil && w.f != nil {
				w.f.Close()
			}
			if w != nil && !done {
				os.Remove(w.path)
			}
		}
	}()
	for q := range m {
		if ws[q], err = newSnapWriter(filepath.Join(s.Dir(newOpDir, q), strconv.FormatInt(version, 10)+".snapshot")); err != nil {
			return nil, 0, err
		}
	}
	fp, err := routeRows(ctx, c, op, s, ws, gate, opts,
		func(p int, row func(k, v []byte) error) (int64, error) {
			dir := s.Dir(op.Dir, p)
			if stream {
				pf, err := ListPartition(dir)
				if err != nil {
					return 0, err
				}
				_, size, streamed, err := streamRows(pf, c.StateVersion(), betOnDelta, row)
				if err != nil || streamed {
					return size, err
				}
			}
			_, size, err := ForEachRow(dir, c.StateVersion(), row)
			return size, err
		},
		func(bufs [][]byte, p, q int, k, v []byte) { bufs[q] = AppendRecord(bufs[q], k, v, false) })
	if err != nil {
		return nil, 0, err
	}
	written, err := finishAll(ws)
	if err != nil {
		return nil, 0, err
	}
	done = true
	return fp, written, nil
}

// routeRows reads every old partition p of store s at the committed
// version with read (at most opts.Parallelism at a time, within gate),
// refuses a key outside the partition Spark's rule puts it in, and hands
// each row with its new partition q to route, which appends records to
// the buffers of the new partitions; a buffer goes to its writer in ws
// when it holds 64 KiB and at the end. It returns the fingerprint of
// every row read.
func routeRows(ctx context.Context, c *Checkpoint, op *Operator, s *Store, ws []*snapWriter, gate *memGate, opts RewriteOptions,
	read func(p int, row func(k, v []byte) error) (int64, error),
	route func(bufs [][]byte, p, q int, k, v []byte)) (*Fingerprint, error) {
	m := len(ws)
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
			held, err := gate.acquire(gctx, c.layout.loadEstimate(s.Dir(op.Dir, p), c.StateVersion()))
			if err != nil {
				return err
			}
			defer gate.release(held)
			bufs := make([][]byte, m)
			flush := func(q, atLeast int) error {
				if len(bufs[q]) > 0 && len(bufs[q]) >= atLeast {
					if err := ws[q].write(bufs[q]); err != nil {
						return err
					}
					bufs[q] = bufs[q][:0]
				}
				return nil
			}
			var local Fingerprint
			size, err := read(p, func(k, v []byte) error {
				h, err := s.partitionHash(k)
				if err != nil {
					return fmt.Errorf("key %x: %w", k, err)
				}
				if old := sparkhash.Pmod(h, c.Partitions); old != p {
					return fmt.Errorf("%w: partition %d holds key %s, which Spark's rule puts in partition %d: the query does not partition its state as rebucket expects", snapshotfmt.ErrRefused, p, showKey(s, string(k)), old)
				}
				local.add(k, v)
				q := sparkhash.Pmod(h, m)
				route(bufs, p, q, k, v)
				if err := flush(q, flushAt); err != nil {
					return err
				}
				if p < m && p != q {
					return flush(p, flushAt)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			for q := range bufs {
				if err := flush(q, 1); err != nil {
					return err
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
		return nil, err
	}
	return fp, nil
}

// finishAll finishes every writer of ws; it returns the bytes written.
func finishAll(ws []*snapWriter) (int64, error) {
	var written int64
	for q, w := range ws {
		n, err := w.finish()
		if err != nil {
			return 0, err
		}
		ws[q].f = nil
		written += n
	}
	return written, nil
}

// syncDirs fsyncs every directory under dir (their entries), deepest
// first does not matter once syncTree has run.
func syncDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return fsx.SyncDir(nil, p)
	})
}

// copyTree copies every file and directory of src into the new dst.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.Mkdir(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", snapshotfmt.ErrUnsupported, path)
		}
		// Spark's own checkpoint file checksums (<file>.crc, JSON; Hadoop's
		// side files start with a dot) would be missing for the new files.
		if n := d.Name(); strings.HasSuffix(n, ".crc") && !strings.HasPrefix(n, ".") {
			return fmt.Errorf("%w: %s is one of Spark's checkpoint file checksums (spark.sql.streaming.checkpoint.fileChecksum.enabled), which rebucket does not write yet", snapshotfmt.ErrUnsupported, path)
		}
		return copyFile(path, target)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
