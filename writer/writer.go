// Package writer writes snapshots: entries in encoded-key order become
// Pebble SSTables that each cover a contiguous bucket range, cut at a target
// size and only at bucket boundaries unless one bucket alone exceeds it.
// Files, per-bucket stats and per-worker state are gathered into a manifest
// written last, and the whole directory is published atomically (Stage).
//
// One Snapshot may have many BucketWriters working in parallel, one per
// goroutine, each owning a disjoint range of buckets.
package writer

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// DefaultFileSize is the default target size of one data file.
const DefaultFileSize = 128 << 20

// ErrOutOfOrder is returned by Add for a key not strictly above the last.
var ErrOutOfOrder = errors.New("entries out of order")

// Options tune a write. The zero value works.
type Options struct {
	// FileSize is the target size of one data file (default 128 MiB).
	FileSize int64
	// Force replaces an existing non-empty target once the new snapshot is
	// complete.
	Force bool
	// Compression is "snappy" (default), "zstd" or "none".
	Compression string
	// FS carries the file operations (nil: the real filesystem); tests
	// inject faults through it.
	FS fsx.FS
}

// Header is what the caller decides about the snapshot besides its entries.
type Header struct {
	Partitioning snapshotfmt.Partitioning
	WidthAtWrite int
	States       []snapshotfmt.State
	Lineage      []snapshotfmt.Lineage
	Tool         string
	// CutWidths are widths whose workers' bucket ranges every file is cut
	// at (besides the size cut), so a start at any of them ingests whole
	// files; recorded in the manifest (cut_widths). Sorted and deduplicated
	// here; widths outside 1..snapshotfmt.MaxWidth are refused.
	CutWidths []int
}

// Snapshot is a snapshot under construction.
type Snapshot struct {
	stage  *Stage
	header Header
	opts   Options
	wopts  sstable.WriterOptions
	// states[id] is true for the ids of the states table (an array, not a
	// map: Add looks it up for every entry).
	states *[1 << 16]bool
	// cuts[b] counts the buckets in 1..b at which a worker of a cut width
	// begins: a file holding buckets a and b must have cuts[a] == cuts[b].
	// nil without cut widths.
	cuts []uint32

	mu            sync.Mutex
	files         []snapshotfmt.DataFile
	bucketEntries []uint64
	bucketBytes   []uint64
	stateEntries  map[uint16]uint64
	workerStates  []snapshotfmt.WorkerState
	openWriters   int

	// Data files are fsynced in the background (syncFile) so a writer
	// goes on with its next file while the disk catches up; Commit waits
	// for every sync before the manifest. syncErr is the first failure.
	syncs   sync.WaitGroup
	syncSem chan struct{}
	syncErr error
}

// maxBackgroundSyncs bounds the data files being fsynced at once (each
// holds an open descriptor).
const maxBackgroundSyncs = 16

// dataBlockSize is the target size of an SSTable data and index block.
const dataBlockSize = 32 << 10

// bufPool holds the write buffers of data files, reused across files: a
// rewrite into thousands of buckets would otherwise allocate one per file.
var bufPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}

// Create begins a snapshot at target (see Begin for the checks).
func Create(target string, h Header, opts Options) (*Snapshot, error) {
	if err := h.Partitioning.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", snapshotfmt.ErrInvalidArgument, err)
	}
	if h.WidthAtWrite < 1 {
		return nil, fmt.Errorf("%w: width at write %d", snapshotfmt.ErrInvalidArgument, h.WidthAtWrite)
	}
	if opts.FileSize <= 0 {
		opts.FileSize = DefaultFileSize
	}
	// 32 KiB blocks (Pebble's default is 4 KiB): every reader of a snapshot
	// scans it whole, and each block costs a read, a cache allocation, a
	// checksum and an index entry. Measured on 10M entries: verify
	// --against 2.6 -> 2.05 CPU s, load at width 40 4.7 -> 4.2.
	wo := sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev4, BlockSize: dataBlockSize, IndexBlockSize: dataBlockSize}
	switch opts.Compression {
	case "", "snappy":
		wo.Compression = sstable.SnappyCompression
	case "zstd":
		wo.Compression = sstable.ZstdCompression
	case "none":
		wo.Compression = sstable.NoCompression
	default:
		return nil, fmt.Errorf("%w: compression %q: want snappy, zstd or none", snapshotfmt.ErrInvalidArgument, opts.Compression)
	}
	n := int(h.Partitioning.Buckets)
	widths := slices.Clone(h.CutWidths)
	slices.Sort(widths)
	h.CutWidths = slices.Compact(widths)
	var cutAt []bool
	var cuts []uint32
	for _, w := range h.CutWidths {
		if w < 1 || w > snapshotfmt.MaxWidth {
			return nil, fmt.Errorf("%w: cut width %d: want 1..%d", snapshotfmt.ErrInvalidArgument, w, snapshotfmt.MaxWidth)
		}
		if cutAt == nil {
			cutAt = make([]bool, n)
		}
		for b := 1; b < n; b++ {
			if snapshotfmt.OwnerOf(b, w, n) != snapshotfmt.OwnerOf(b-1, w, n) {
				cutAt[b] = true
			}
		}
	}
	if cutAt != nil {
		cuts = make([]uint32, n)
		for b := 1; b < n; b++ {
			cuts[b] = cuts[b-1]
			if cutAt[b] {
				cuts[b]++
			}
		}
	}
	states := new([1 << 16]bool)
	for _, s := range h.States {
		states[s.ID] = true
	}
	st, err := BeginFS(target, opts.Force, opts.FS)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{snapshotfmt.DataDir, snapshotfmt.WorkersDir} {
		if err := st.fs.Mkdir(filepath.Join(st.Dir(), d), fsx.DirPerm); err != nil {
			st.Abort()
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	return &Snapshot{
		stage: st, header: h, opts: opts, wopts: wo, states: states, cuts: cuts,
		bucketEntries: make([]uint64, n), bucketBytes: make([]uint64, n),
		stateEntries: map[uint16]uint64{}, syncSem: make(chan struct{}, maxBackgroundSyncs),
	}, nil
}

// Stage exposes the publication stage (for its Removed/Leftover reports).
func (s *Snapshot) Stage() *Stage { return s.stage }

// Dir is the temporary directory being written.
func (s *Snapshot) Dir() string { return s.stage.Dir() }

// NewBucketWriter returns a writer for one goroutine. Its keys must be in
// strictly increasing order, and no two BucketWriters may write the same
// bucket.
func (s *Snapshot) NewBucketWriter() *BucketWriter {
	s.mu.Lock()
	s.openWriters++
	s.mu.Unlock()
	return &BucketWriter{s: s, curBucket: -1, partBucket: -1}
}

// BucketWriter writes one ordered run of entries into files.
type BucketWriter struct {
	s   *Snapshot
	cur *openFile
	// last is the previous key (copied), for the order check and file bounds.
	last    []byte
	haveKey bool
	// curBucket is the bucket of the last key and curBucketBytes its bytes
	// in the open file, to decide whether a cut may split a bucket.
	curBucket      int64
	curBucketBytes int64
	stats          []bucketStat
	stateEntries   []uint64 // indexed by state id
	closed         bool
	partBucket     int64
	part           int
}

type bucketStat struct {
	bucket         uint32
	entries, bytes uint64
}

type openFile struct {
	path     string
	f        fsx.File
	w        *sstable.Writer
	hw       *hashingWritable
	smallest []byte
	bucketLo uint32
	entries  uint64
}

// Add appends one entry. The key is an encoded key (snapshotfmt.EncodeKey)
// whose state id is in the states table; the caller may reuse both slices
// after Add returns.
func (bw *BucketWriter) Add(key, value []byte) error {
	dk, err := snapshotfmt.DecodeKey(key)
	if err != nil {
		return fmt.Errorf("add entry: %w", err)
	}
	if uint64(dk.Bucket) >= uint64(bw.s.header.Partitioning.Buckets) {
		return fmt.Errorf("%w: add entry: bucket %d outside [0, %d)", snapshotfmt.ErrInvalidArgument, dk.Bucket, bw.s.header.Partitioning.Buckets)
	}
	if !bw.s.states[dk.State] {
		return fmt.Errorf("%w: add entry: state id %d is not in the states table", snapshotfmt.ErrInvalidArgument, dk.State)
	}
	if bw.haveKey && bytes.Compare(key, bw.last) <= 0 {
		return fmt.Errorf("%w: key %x after %x", ErrOutOfOrder, key, bw.last)
	}
	b := int64(dk.Bucket)
	if bw.cur != nil && b != bw.curBucket && bw.s.cuts != nil && bw.s.cuts[b] != bw.s.cuts[bw.curBucket] {
		// A worker of a cut width begins at or before this bucket.
		if err := bw.finishFile(); err != nil {
			return err
		}
	}
	if bw.cur != nil {
		size := int64(bw.cur.w.Raw().EstimatedSize())
		if size >= bw.s.opts.FileSize && (b != bw.curBucket || bw.curBucketBytes >= bw.s.opts.FileSize || int64(bw.cur.bucketLo) == b) {
			if err := bw.finishFile(); err != nil {
				return err
			}
		}
	}
	if b != bw.curBucket {
		bw.curBucket = b
		bw.curBucketBytes = 0
		bw.stats = append(bw.stats, bucketStat{bucket: dk.Bucket})
	}
	if bw.cur == nil {
		if err := bw.openFile(dk.Bucket, key); err != nil {
			return err
		}
	}
	if err := bw.cur.w.Set(key, value); err != nil {
		return fmt.Errorf("write %s: %w", bw.cur.path, err)
	}
	n := int64(len(key) + len(value))
	bw.curBucketBytes += n
	st := &bw.stats[len(bw.stats)-1]
	st.entries++
	st.bytes += uint64(n)
	bw.cur.entries++
	if int(dk.State) >= len(bw.stateEntries) {
		bw.stateEntries = append(bw.stateEntries, make([]uint64, int(dk.State)+1-len(bw.stateEntries))...)
	}
	bw.stateEntries[dk.State]++
	bw.last = append(bw.last[:0], key...)
	bw.haveKey = true
	return nil
}

func (bw *BucketWriter) openFile(bucket uint32, first []byte) error {
	// Names are deterministic: no two writers share a bucket, so the first
	// bucket and this writer's count of files begun at it are unique.
	if bw.partBucket != int64(bucket) {
		bw.partBucket, bw.part = int64(bucket), 0
	}
	bw.part++
	name := fmt.Sprintf("%05d-%04d.sst", bucket, bw.part)
	rel := snapshotfmt.DataDir + "/" + name
	p := filepath.Join(bw.s.stage.Dir(), snapshotfmt.DataDir, name)
	f, err := fsx.Create(bw.s.stage.fs, p, fsx.FilePerm)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	buf := bufPool.Get().(*bufio.Writer)
	buf.Reset(f)
	hw := &hashingWritable{s: bw.s, f: f, path: p, bw: buf, h: xxh3.New()}
	bw.cur = &openFile{
		path: rel, f: f, hw: hw, w: sstable.NewWriter(hw, bw.s.wopts),
		smallest: append([]byte(nil), first...), bucketLo: bucket,
	}
	bw.curBucketBytes = 0
	return nil
}

func (bw *BucketWriter) finishFile() error {
	of := bw.cur
	bw.cur = nil
	if err := of.w.Close(); err != nil {
		return fmt.Errorf("finish %s: %w", of.path, err)
	}
	lastBucket, _ := snapshotfmt.KeyBucket(bw.last)
	df := snapshotfmt.DataFile{
		Path:     of.path,
		BucketLo: of.bucketLo,
		BucketHi: lastBucket,
		Smallest: hex.EncodeToString(of.smallest),
		Largest:  hex.EncodeToString(bw.last),
		Entries:  of.entries,
		Size:     of.hw.n,
		Checksum: snapshotfmt.Sum128Hex(of.hw.h.Sum128()),
	}
	bw.s.mu.Lock()
	bw.s.files = append(bw.s.files, df)
	bw.s.mu.Unlock()
	return nil
}

// Close finishes the open file and hands this writer's files and stats to
// the snapshot.
func (bw *BucketWriter) Close() error {
	if bw.closed {
		return nil
	}
	bw.closed = true
	var err error
	if bw.cur != nil {
		err = bw.finishFile()
	}
	s := bw.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.openWriters--
	for _, st := range bw.stats {
		s.bucketEntries[st.bucket] += st.entries
		s.bucketBytes[st.bucket] += st.bytes
	}
	for id, c := range bw.stateEntries {
		s.stateEntries[uint16(id)] += c
	}
	return err
}

// Abort drops the open file; the snapshot's Abort removes everything.
func (bw *BucketWriter) Abort() {
	if bw.closed {
		return
	}
	bw.closed = true
	if bw.cur != nil {
		bw.cur.w.Close()
		bw.cur = nil
	}
	bw.s.mu.Lock()
	bw.s.openWriters--
	bw.s.mu.Unlock()
}

// hashingWritable is an objstorage.Writable over a file that checksums the
// bytes as they pass (the writer appends only, so this is the whole file).
type hashingWritable struct {
	s    *Snapshot
	f    fsx.File
	path string
	bw   *bufio.Writer
	h    *xxh3.Hasher
	n    int64
}

func (w *hashingWritable) Write(p []byte) error {
	w.h.Write(p)
	w.n += int64(len(p))
	if _, err := w.bw.Write(p); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

func (w *hashingWritable) Finish() error {
	if err := w.bw.Flush(); err != nil {
		w.f.Close()
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	w.bw.Reset(nil)
	bufPool.Put(w.bw)
	w.bw = nil
	w.s.syncFile(w.f, w.path)
	return nil
}

// syncFile fsyncs and closes a finished data file in the background; a
// failure fails Commit.
func (s *Snapshot) syncFile(f fsx.File, path string) {
	s.syncSem <- struct{}{}
	s.syncs.Add(1)
	go func() {
		defer func() { <-s.syncSem; s.syncs.Done() }()
		err := f.Sync()
		if err != nil {
			err = fmt.Errorf("fsync %s: %w", path, err)
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
		if err != nil {
			s.mu.Lock()
			if s.syncErr == nil {
				s.syncErr = err
			}
			s.mu.Unlock()
		}
	}()
}

func (w *hashingWritable) Abort() { w.f.Close() }

// WriteWorkerState writes one per-worker state: items[i] is worker i's list,
// one list per worker at the width of the write.
func (s *Snapshot) WriteWorkerState(step, name string, rule snapshotfmt.Rule, items [][][]byte) error {
	if len(items) != s.header.WidthAtWrite {
		return fmt.Errorf("%w: per-worker state %s/%s has %d workers' items, want %d (the width at write)", snapshotfmt.ErrInvalidArgument, step, name, len(items), s.header.WidthAtWrite)
	}
	raw := make([][]byte, len(items))
	counts := make([]uint64, len(items))
	for i, it := range items {
		raw[i] = snapshotfmt.EncodeWorkerItems(it)
		counts[i] = uint64(len(it))
	}
	return s.WriteWorkerStateFiles(step, name, rule, raw, counts)
}

// WriteWorkerStateFiles writes per-worker state files already encoded
// (rewrites carry them byte for byte).
func (s *Snapshot) WriteWorkerStateFiles(step, name string, rule snapshotfmt.Rule, files [][]byte, items []uint64) error {
	ws := snapshotfmt.WorkerState{Step: step, Name: name, Rule: rule}
	s.mu.Lock()
	idx := len(s.workerStates)
	s.mu.Unlock()
	for i, data := range files {
		rel := fmt.Sprintf("%s/%03d-%05d.bin", snapshotfmt.WorkersDir, idx, i)
		if err := writeFileSync(s.stage.fs, filepath.Join(s.stage.Dir(), rel), data); err != nil {
			return err
		}
		ws.Files = append(ws.Files, snapshotfmt.WorkerFile{
			Worker: i, Path: rel, Items: items[i], Size: int64(len(data)), Checksum: snapshotfmt.Checksum(data),
		})
	}
	s.mu.Lock()
	s.workerStates = append(s.workerStates, ws)
	s.mu.Unlock()
	return nil
}

// Manifest builds the manifest of what has been written so far.
func (s *Snapshot) manifest() *snapshotfmt.Manifest {
	files := append([]snapshotfmt.DataFile(nil), s.files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Smallest < files[j].Smallest })
	states := append([]snapshotfmt.State(nil), s.header.States...)
	sort.Slice(states, func(i, j int) bool { return states[i].ID < states[j].ID })
	for i := range states {
		states[i].Entries = s.stateEntries[states[i].ID]
	}
	ws := append([]snapshotfmt.WorkerState{}, s.workerStates...)
	now := time.Now().UTC()
	lineage := append([]snapshotfmt.Lineage{}, s.header.Lineage...)
	for i := range lineage {
		if lineage[i].Time.IsZero() {
			lineage[i].Time = now
		}
	}
	return &snapshotfmt.Manifest{
		Format:        snapshotfmt.FormatName,
		Version:       snapshotfmt.FormatVersion,
		TableFormat:   snapshotfmt.TableFormat,
		Created:       now,
		Tool:          s.header.Tool,
		Partitioning:  s.header.Partitioning,
		WidthAtWrite:  s.header.WidthAtWrite,
		CutWidths:     s.header.CutWidths,
		States:        states,
		Files:         files,
		BucketEntries: s.bucketEntries,
		BucketBytes:   s.bucketBytes,
		WorkerStates:  ws,
		Lineage:       lineage,
	}
}

// Commit seals and publishes the snapshot: Seal, then Publish. On error
// nothing is published and the temporary directory is removed.
func (s *Snapshot) Commit() (*snapshotfmt.Manifest, error) {
	m, err := s.Seal()
	if err != nil {
		return nil, err
	}
	if err := s.Publish(); err != nil {
		return nil, err
	}
	return m, nil
}

// Seal fsyncs the directories and writes MANIFEST.json last, leaving a
// complete snapshot in the temporary directory (Dir) that a caller can read
// back and check before it calls Publish, or Abort. Every BucketWriter must
// be closed. On error the temporary directory is removed.
func (s *Snapshot) Seal() (*snapshotfmt.Manifest, error) {
	m, err := s.seal()
	if err != nil {
		s.syncs.Wait()
		s.stage.Abort()
		return nil, err
	}
	return m, nil
}

// Publish makes a sealed snapshot the target (see Stage.Publish). On error
// the temporary directory is removed.
func (s *Snapshot) Publish() error {
	if err := s.stage.Publish(); err != nil {
		s.stage.Abort()
		return err
	}
	return nil
}

func (s *Snapshot) seal() (*snapshotfmt.Manifest, error) {
	s.mu.Lock()
	open := s.openWriters
	s.mu.Unlock()
	if open != 0 {
		return nil, fmt.Errorf("commit with %d bucket writers still open", open)
	}
	s.syncs.Wait()
	if s.syncErr != nil {
		return nil, s.syncErr
	}
	m := s.manifest()
	if err := m.Validate(); err != nil {
		// Overlapping files from two writers of one bucket end up here.
		return nil, fmt.Errorf("written snapshot is inconsistent (a bug in the caller): %w", err)
	}
	for _, d := range []string{snapshotfmt.DataDir, snapshotfmt.WorkersDir} {
		if err := syncDir(s.stage.fs, filepath.Join(s.stage.Dir(), d)); err != nil {
			return nil, err
		}
	}
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	// A manifest no reader would accept must not be published: the files'
	// bounds hold whole keys (hex), so huge keys cut into many files can
	// outgrow the bound.
	if len(data) > snapshotfmt.MaxManifestSize {
		return nil, fmt.Errorf("%w: the manifest would be %d MiB, over the %d MiB a reader accepts (%d files, whose key bounds are stored whole); write fewer, larger files", snapshotfmt.ErrTooLarge, len(data)>>20, snapshotfmt.MaxManifestSize>>20, len(m.Files))
	}
	if err := writeFileSync(s.stage.fs, filepath.Join(s.stage.Dir(), snapshotfmt.ManifestName), data); err != nil {
		return nil, err
	}
	return m, nil
}

// Abort removes everything written and releases the lock.
func (s *Snapshot) Abort() {
	s.syncs.Wait()
	s.stage.Abort()
}
