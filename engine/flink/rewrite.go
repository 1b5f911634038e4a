package flink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Progress receives progress of long work, in bytes of keyed state read; Add is
// called from several goroutines at once.
type Progress = progress.Reporter

// RewriteOptions tune Rewrite.
type RewriteOptions struct {
	// MaxParallelism is the new max parallelism (number of key groups),
	// 1..32768. Required.
	MaxParallelism int
	// Memory bounds the entries held in memory while regrouping (default
	// plan.DefaultMemory()); above it, entries spill to TmpDir.
	Memory int64
	// TmpDir holds spill files (default: beside the target).
	TmpDir string
	// Parallelism is the number of scanning goroutines (default GOMAXPROCS).
	Parallelism int
	// Files is the number of keyed-state files per keyed operator, each
	// owning a contiguous key-group range and written by its own goroutine
	// (default: the operator's subtask count, at most Parallelism).
	// It is capped by the subtasks in _metadata (one keyed handle each) and
	// by MaxParallelism.
	Files    int
	Progress Progress
}

// RewriteResult says what Rewrite did.
type RewriteResult struct {
	Source             string            `json:"source"`
	Target             string            `json:"target"`
	FromMaxParallelism int               `json:"from_max_parallelism"`
	MaxParallelism     int               `json:"max_parallelism"`
	Operators          []RewriteOperator `json:"operators"`
	Entries            uint64            `json:"entries"`
	SpilledRuns        int               `json:"spilled_runs"`
	SpillBytes         int64             `json:"spill_bytes"`
	Verified           bool              `json:"verified"`
}

// RewriteOperator is one rewritten keyed operator.
type RewriteOperator struct {
	UID     string `json:"uid"`
	ID      string `json:"id"`
	KeyType string `json:"key_type"`
	Entries uint64 `json:"entries"`
	Files   int    `json:"files"`
	Bytes   int64  `json:"bytes"`
}

// TempPrefix starts the name of Rewrite's temporary directory beside the
// target (the rest: process id and a random suffix, see fsx.TempName).
const TempPrefix = ".rebucket-flink-"

// SpillPrefix starts the name of the run directory Rewrite spills into
// in RewriteOptions.TmpDir (removed when it ends). Both kinds of run
// directory are locked for their run's life (fsx.MkdirRun); every Rewrite
// first removes those of dead runs (fsx.RemoveStale), so a crash leaves
// nothing that the next run into the same place does not clean up.
const SpillPrefix = ".rebucket-flink-spill-"

// Rewrite writes the canonical savepoint src with max parallelism
// opts.MaxParallelism into the new directory dst: every keyed entry gets
// the key group of its key under the new max parallelism (timers too),
// entries are regrouped into canonical keyed-state files with relative
// handles, every operator carries the new max parallelism, and everything
// else (operator, coordinator and master state, checkpoint properties) is
// carried byte for byte. The result is verified before it is published by
// renaming a temporary directory beside dst. src is only read.
func Rewrite(ctx context.Context, src, dst string, opts RewriteOptions) (*RewriteResult, error) {
	m := opts.MaxParallelism
	if m < 1 || m > keytype.MaxParallelismUpperBound {
		return nil, fmt.Errorf("%w: max parallelism %d: Flink allows 1 to 32768", snapshotfmt.ErrInvalidArgument, m)
	}
	if opts.Memory <= 0 {
		opts.Memory = plan.DefaultMemory()
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	sp, err := Open(src)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("%w: target %s exists; give a new directory", snapshotfmt.ErrRefused, dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	absSrc, _ := filepath.Abs(sp.Dir)
	absDst, _ := filepath.Abs(dst)
	if rel, err := filepath.Rel(absSrc, absDst); err == nil && filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%w: target %s is inside the source savepoint %s", snapshotfmt.ErrRefused, dst, sp.Dir)
	}
	ops, err := sp.openKeyedOps()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range ops {
			k.close()
		}
	}()
	for _, k := range ops {
		if k.codecErr != nil {
			return nil, fmt.Errorf("cannot rehash: %w; nothing was written", k.codecErr)
		}
	}
	if err := checkNarrowing(sp.Meta, m); err != nil {
		return nil, err
	}
	if err := checkOperatorState(sp.Meta); err != nil {
		return nil, err
	}
	res := &RewriteResult{Source: src, Target: dst, FromMaxParallelism: sp.MaxParallelism(), MaxParallelism: m}

	// The new savepoint is staged in a run directory beside the target,
	// locked for this run's life (fsx.MkdirRun): a run killed before it
	// published leaves one that this and every later run removes (and no
	// run removes a live one's). The staged directory is a child of the
	// run directory, so publishing renames it out and the lock file never
	// reaches the target.
	parent := filepath.Dir(absDst)
	fsx.RemoveStale(nil, parent, TempPrefix)
	runDir, err := fsx.MkdirRun(nil, parent, TempPrefix, 0o700)
	if err != nil {
		return nil, fmt.Errorf("create temporary directory beside the target: %w", err)
	}
	defer runDir.Remove()
	tmp := filepath.Join(runDir.Path, "savepoint")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("create temporary directory beside the target: %w", err)
	}
	// Operator state files are carried as they are, under the same names
	// (first, so a missing one stops the run before the long work).
	if err := copyOperatorStateFiles(sp, tmp); err != nil {
		return nil, err
	}
	// Spill files go to a run directory of their own in --tmp (locked and
	// cleaned up the same way), or beside the staged savepoint.
	spillDir := runDir.Path
	if opts.TmpDir != "" {
		fsx.RemoveStale(nil, opts.TmpDir, SpillPrefix)
		sd, err := fsx.MkdirRun(nil, opts.TmpDir, SpillPrefix, 0o700)
		if err != nil {
			return nil, fmt.Errorf("create a spill directory in %s: %w", opts.TmpDir, err)
		}
		defer sd.Remove()
		spillDir = sd.Path
	}

	var total int64
	for _, k := range ops {
		for _, s := range k.streams {
			total += s.Size
		}
	}
	opts.Progress.Start(total, "rewrite keyed state")
	defer opts.Progress.Finish()

	newMD := *sp.Meta
	newMD.Operators = make([]*OperatorState, len(sp.Meta.Operators))
	srcFP := &fpSet{}
	byOp := map[*OperatorState]*keyedOp{}
	for _, k := range ops {
		byOp[k.op] = k
	}
	for i, op := range sp.Meta.Operators {
		nop := *op
		nop.MaxParallelism = int32(m)
		// Flink refuses to load an operator whose parallelism exceeds its
		// max parallelism: above m, subtasks go (checkNarrowing made sure
		// they hold nothing but keyed state, which is regrouped anyway).
		nop.Subtasks = nil
		if nop.Parallelism > int32(m) {
			nop.Parallelism = int32(m)
		}
		for _, st := range op.Subtasks {
			if st.Index >= nop.Parallelism {
				continue
			}
			c := *st
			c.ManagedKeyed = nil
			nop.Subtasks = append(nop.Subtasks, &c)
		}
		newMD.Operators[i] = &nop
		k := byOp[op]
		if k == nil {
			continue
		}
		var slots []*SubtaskState
		for _, st := range nop.Subtasks {
			if !st.Finished {
				slots = append(slots, st)
			}
		}
		slices.SortFunc(slots, func(a, b *SubtaskState) int { return int(a.Index - b.Index) })
		files := opts.Files
		if files <= 0 {
			files = min(len(k.streams), opts.Parallelism)
		}
		files = max(1, min(files, len(slots), m))
		handles, ro, st, err := rewriteOperator(ctx, k, m, files, tmp, spillDir, opts, srcFP)
		if err != nil {
			return nil, err
		}
		for f, h := range handles {
			slots[f].ManagedKeyed = h
		}
		res.Operators = append(res.Operators, ro)
		res.Entries += ro.Entries
		res.SpilledRuns += st.runs
		res.SpillBytes += st.bytes
	}

	mdBytes, err := newMD.Encode()
	if err != nil {
		return nil, err
	}
	// Self-verification: decode what will be written, re-read every
	// keyed-state file, check every prefix against the hashed key, and
	// compare the entries with the source's.
	md2, err := DecodeMetadata(mdBytes)
	if err != nil {
		return nil, fmt.Errorf("self-verification: new _metadata does not decode: %w", err)
	}
	out := &Savepoint{Dir: tmp, Meta: md2, MetaBytes: mdBytes}
	// Keys need not be rehashed here: the source fingerprints cover each
	// entry framed with the key group its key hashed to, so equal
	// fingerprints prove every written prefix is that key group; the scan
	// checks framing, bounds, and that each prefix is its section's.
	rep, err := out.scan(ctx, ScanOptions{Parallelism: opts.Parallelism, framedFP: true})
	if err != nil {
		return nil, fmt.Errorf("self-verification: %w", err)
	}
	if len(rep.Findings) > 0 {
		return nil, fmt.Errorf("self-verification failed, nothing published: %s", rep.Findings[0])
	}
	if d := diffFingerprints(srcFP.m, rep.fp); d != "" {
		return nil, fmt.Errorf("self-verification failed, nothing published: %s", d)
	}
	res.Verified = true
	if err := writeFileSync(filepath.Join(tmp, MetadataFile), mdBytes); err != nil {
		return nil, err
	}
	if err := fsx.SyncDir(nil, tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, absDst); err != nil {
		return nil, fmt.Errorf("publish %s: %w", dst, err)
	}
	if err := fsx.SyncDir(nil, filepath.Dir(absDst)); err != nil {
		return res, err
	}
	return res, nil
}

// checkNarrowing refuses a max parallelism below an operator's
// parallelism when a subtask that would have to go holds state other than
// keyed state (operator, channel state): it could not be carried.
func checkNarrowing(md *Metadata, m int) error {
	for _, op := range md.Operators {
		if int(op.Parallelism) <= m {
			continue
		}
		for _, st := range op.Subtasks {
			if int(st.Index) < m || st.Finished {
				continue
			}
			if !emptyOperatorState(st.ManagedOperator) || !emptyOperatorState(st.RawOperator) || len(st.InputChannels)+len(st.OutputChannels) > 0 {
				return fmt.Errorf("%w: operator %s runs at parallelism %d and its subtask %d holds operator state; Flink cannot load an operator whose parallelism is above its max parallelism %d, and that state cannot be moved; choose a max parallelism of at least %d, or take the savepoint from a job running at parallelism %d or less; nothing was written", snapshotfmt.ErrRefused, op.Label(), op.Parallelism, st.Index, m, op.Parallelism, m)
			}
		}
	}
	return nil
}

// checkOperatorState refuses damaged operator state up front (verify
// reports the same as a finding): operator state is carried byte for byte,
// so damage would otherwise surface only in the self-verification, after
// the long work, as a failure of the run rather than of its input.
func checkOperatorState(md *Metadata) error {
	for _, op := range md.Operators {
		for _, st := range op.Subtasks {
			for _, h := range []*OperatorStateHandle{st.ManagedOperator, st.RawOperator} {
				if h == nil {
					continue
				}
				for _, ms := range h.States {
					for _, o := range ms.Offsets {
						if h.Delegate == nil || o < 0 || o >= h.Delegate.Len() {
							var n int64
							if h.Delegate != nil {
								n = h.Delegate.Len()
							}
							return fmt.Errorf("%w: _metadata: operator %s subtask %d state %q: partition offset %d outside its %d-byte stream; nothing was written", snapshotfmt.ErrCorrupt, op.Label(), st.Index, JavaString(ms.Name), o, n)
						}
					}
				}
			}
		}
	}
	return nil
}

// emptyOperatorState: no handle, or one whose states have no partitions.
func emptyOperatorState(h *OperatorStateHandle) bool {
	if h == nil {
		return true
	}
	for _, s := range h.States {
		if len(s.Offsets) > 0 {
			return false
		}
	}
	return true
}

func writeFileSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyOperatorStateFiles(sp *Savepoint, dir string) error {
	done := map[string]bool{}
	for _, op := range sp.Meta.Operators {
		for _, st := range op.Subtasks {
			for _, h := range []*OperatorStateHandle{st.ManagedOperator, st.RawOperator} {
				if h == nil || h.Delegate == nil || h.Delegate.Type != handleRelativeFile || done[h.Delegate.Path] {
					continue
				}
				done[h.Delegate.Path] = true
				p, err := sp.handleFile(h.Delegate)
				if err != nil {
					return err
				}
				if err := copyFile(p, filepath.Join(dir, filepath.FromSlash(h.Delegate.Path)), h.Delegate.Size); err != nil {
					return fmt.Errorf("copy operator state of %s: %w", op.Label(), err)
				}
			}
		}
	}
	return nil
}

func copyFile(from, to string, size int64) error {
	in, err := os.Open(from)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: operator state file %s named in _metadata is missing", snapshotfmt.ErrCorrupt, from)
		}
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err == nil && n != size {
		err = fmt.Errorf("%w: operator state file %s is %d bytes, _metadata says %d", snapshotfmt.ErrCorrupt, from, n, size)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// rec is one routed entry: its new key group and state, and where its
// framed bytes (i32 keyLen, key with the new prefix, i32 valueLen, value:
// exactly what the stream holds) sit in its batch's buffer.
type rec struct {
	kg, state int32
	off       uint64
}

// batchBytes is the size of a scanner's batch buffer; owners copy the
// entries into their slots and hand the buffer back.
const batchBytes = 256 << 10

type batch struct {
	buf  []byte
	recs []rec
}

var (
	batchPool = sync.Pool{New: func() any { return &batch{} }}
	bufPool   = sync.Pool{New: func() any { return make([]byte, 0, batchBytes) }}
)

func getBuf() []byte { return bufPool.Get().([]byte)[:0] }

func putBuf(b []byte) {
	if cap(b) == batchBytes {
		bufPool.Put(b[:0]) //nolint:staticcheck // a slice header per batch is nothing
	}
}

type spillStats struct {
	runs  int
	bytes int64
}

// rewriteOperator regroups one keyed operator into files key-group-range
// files. Scanners read the source sections in parallel, rehash each key
// and route the entry to the owner of its new key group; each owner
// buffers its entries (spilling runs grouped by key group and state when
// its share of the memory budget is full) and writes one file.
func rewriteOperator(ctx context.Context, k *keyedOp, m, files int, dir, spillDir string, opts RewriteOptions, srcFP *fpSet) ([]*KeyedHandle, RewriteOperator, spillStats, error) {
	ro := RewriteOperator{UID: JavaString(k.op.UID), ID: k.op.IDString(), KeyType: k.codec.Name(), Files: files}
	nStates := len(k.header.States)
	newW := keytype.PrefixBytes(m)
	owners := make([]*owner, files)
	chans := make([]chan *batch, files)
	for i := range owners {
		lo, hi := keytype.KeyGroupRange(i, m, files)
		owners[i] = &owner{lo: lo, hi: hi, nStates: nStates, budget: opts.Memory / int64(files), spillDir: spillDir,
			name: fmt.Sprintf("keyed-%s-%d-of-%d", k.op.IDString(), i, files)}
		chans[i] = make(chan *batch, 4)
	}
	pow2 := m&(m-1) == 0
	ownerOf := make([]uint16, m) // files <= m <= 32768
	for kg := range ownerOf {
		ownerOf[kg] = uint16(keytype.OperatorIndex(kg, m, files))
	}
	var entries atomic.Uint64
	g, gctx := errgroup.WithContext(ctx)
	for i, o := range owners {
		g.Go(func() error {
			// On an error the group's context is cancelled, and scanners
			// blocked sending to this owner give up.
			if err := o.collect(chans[i]); err != nil {
				return err
			}
			return o.write(gctx, dir, k.header.Len, k.streams[0].HeaderBytes)
		})
	}
	g.Go(func() error {
		defer func() {
			for _, c := range chans {
				close(c)
			}
		}()
		jobs := allSections([]*keyedOp{k})
		workers := opts.Parallelism
		type local struct {
			batches []*batch
			fp      *stateFPs
		}
		locals := make([]*local, max(workers, 1))
		var mu sync.Mutex
		err := scanSections(gctx, jobs, workers, func(w int, j sectionJob, rd *sectionReader) error {
			mu.Lock()
			l := locals[w]
			if l == nil {
				l = &local{batches: make([]*batch, files), fp: &stateFPs{op: k.op, ids: k.header.States, fp: make([]Fingerprint, nStates)}}
				locals[w] = l
			}
			mu.Unlock()
			s := k.streams[j.stream]
			oldW := keytype.PrefixBytes(int(k.op.MaxParallelism))
			remap := k.remap[j.stream]
			_, err := s.ReadSection(j.sec, rd, func(e Entry) error {
				id := remap[e.StateID]
				st := k.header.States[id]
				if len(e.Key) < oldW {
					return fmt.Errorf("%w: %s: key group %d: key %x shorter than its prefix", snapshotfmt.ErrCorrupt, s.Where, j.sec.KeyGroup, e.Key)
				}
				h, err := k.hashKey(st, e.Key, oldW)
				if err != nil {
					return fmt.Errorf("%s: key group %d: %w", s.Where, j.sec.KeyGroup, err)
				}
				// keytype.KeyGroup and OperatorIndex without a division
				// per entry.
				mh := int(keytype.MurmurHash(h))
				kg := mh & (m - 1)
				if !pow2 {
					kg = mh % m
				}
				hv := e.Key[oldW:]
				oi := int(ownerOf[kg])
				b := l.batches[oi]
				klen, vlen := newW+len(hv), len(e.Value)
				need := 8 + klen + vlen
				if b != nil && cap(b.buf)-len(b.buf) < need && len(b.recs) > 0 {
					select {
					case chans[oi] <- b:
					case <-gctx.Done():
						return gctx.Err()
					}
					b = nil
				}
				if b == nil {
					b = batchPool.Get().(*batch)
					b.buf = getBuf()
					l.batches[oi] = b
				}
				if cap(b.buf) < need {
					b.buf = make([]byte, 0, need) // one entry larger than a batch
				}
				off := len(b.buf)
				b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(klen))
				if newW == 2 {
					b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(kg))
				} else {
					b.buf = append(b.buf, byte(kg))
				}
				b.buf = append(b.buf, hv...)
				b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(vlen))
				b.buf = append(b.buf, e.Value...)
				// The source fingerprint covers the entry exactly as it
				// must appear in the output, new prefix included: the
				// self-check's fingerprints of the written files then
				// prove every prefix is its key's hashed key group.
				l.fp.fp[id].add(xxh3.Hash128(b.buf[off:]), len(hv)+vlen)
				b.recs = append(b.recs, rec{kg: int32(kg), state: int32(id), off: uint64(off)})
				return nil
			})
			opts.Progress.Add(j.sec.End - j.sec.Start)
			return err
		})
		if err != nil {
			return err
		}
		for _, l := range locals {
			if l == nil {
				continue
			}
			srcFP.merge(l.fp)
			for oi, b := range l.batches {
				if b != nil {
					select {
					case chans[oi] <- b:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		for _, o := range owners {
			o.cleanup()
		}
		return nil, ro, spillStats{}, err
	}
	var handles []*KeyedHandle
	var st spillStats
	for _, o := range owners {
		handles = append(handles, o.handle)
		ro.Entries += o.entries
		ro.Bytes += o.handle.Delegate.Size
		st.runs += o.spills
		st.bytes += o.spilled
		o.cleanup()
	}
	entries.Add(ro.Entries)
	return handles, ro, st, nil
}
