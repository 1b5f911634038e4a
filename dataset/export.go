package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// DefaultRowGroupRows is the default Parquet row group size: large enough
// for efficient scans and good compression, small enough that the writer's
// buffer (one row group) stays in the tens of MiB.
const DefaultRowGroupRows = 512 << 10

// ExportOptions tune an export. The zero value writes all of a snapshot to
// one zstd-compressed Parquet file.
type ExportOptions struct {
	Format Format
	// View selects states, a bucket range or a worker's buckets, and sets
	// batch size and parallelism.
	View reader.ArrowOptions
	// PartitionBy is "", "state" or "bucket".
	PartitionBy string
	// Compression is zstd, snappy (Parquet only) or none; "" is zstd for
	// Parquet and none for Arrow IPC (readable by every Arrow library,
	// JavaScript's included). It applies to the per-worker table too.
	Compression string
	// RowGroupRows is the Parquet row group size in rows.
	RowGroupRows int64
	// Force replaces an existing output once the new one is complete.
	Force    bool
	Progress progress.Reporter
	Tool     string
}

// ExportResult summarizes an export.
type ExportResult struct {
	Path        string            `json:"path"`
	Format      Format            `json:"format"`
	PartitionBy string            `json:"partition_by,omitempty"`
	Rows        uint64            `json:"rows"`
	StateRows   map[string]uint64 `json:"state_rows"`
	// Files are the data files written, relative to Path for a directory.
	Files []string `json:"files"`
	// Bytes is the size of everything written, per-worker state included.
	Bytes int64 `json:"bytes"`
	// WorkerStateFile is where per-worker state went ("" when none).
	WorkerStateFile  string        `json:"worker_state_file,omitempty"`
	WorkerStateItems uint64        `json:"worker_state_items"`
	Elapsed          time.Duration `json:"-"`
	ElapsedSeconds   float64       `json:"elapsed_seconds"`
}

// Export writes the view of s selected by opts to out, atomically.
func Export(ctx context.Context, s *reader.Snapshot, out string, opts ExportOptions) (*ExportResult, error) {
	start := time.Now()
	if opts.Format == "" {
		opts.Format = Parquet
	}
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return nil, err
	}
	switch opts.PartitionBy {
	case "", "state", "bucket":
	default:
		return nil, fmt.Errorf("%w: partition by %q: want state or bucket", snapshotfmt.ErrInvalidArgument, opts.PartitionBy)
	}
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	if opts.Format == Parquet {
		if _, err := parquetCodec(opts.Compression); err != nil {
			return nil, err
		}
	} else if opts.Format == Arrow && opts.Compression == "snappy" {
		return nil, fmt.Errorf("%w: compression snappy: Arrow IPC files take zstd or none", snapshotfmt.ErrInvalidArgument)
	}
	prog := progress.OrNop(opts.Progress)
	if opts.View.Mem == nil {
		opts.View.Mem = memory.DefaultAllocator
	}
	rr, err := s.NewRecordReader(ctx, opts.View)
	if err != nil {
		return nil, err
	}
	defer func() { rr.Close() }() // rr is replaced between passes

	m := s.Manifest()
	if opts.Format == Parquet {
		// Parquet caps a file at MaxRowGroups row groups; find out before
		// writing anything rather than after writing 32767 of them.
		if rows := rowsPerFile(s, rr.States(), opts); (rows+uint64(opts.RowGroupRows)-1)/uint64(opts.RowGroupRows) > parquet.MaxRowGroups {
			need := (rows + parquet.MaxRowGroups - 1) / parquet.MaxRowGroups
			return nil, fmt.Errorf("%w: --row-group-size %d would put up to %d rows in one Parquet file in about %d row groups; Parquet allows %d: use --row-group-size %d or more",
				snapshotfmt.ErrInvalidArgument, opts.RowGroupRows, rows, (rows+uint64(opts.RowGroupRows)-1)/uint64(opts.RowGroupRows), parquet.MaxRowGroups, need)
		}
	}
	em := exportMeta(m, rr.States(), opts)
	res := &ExportResult{Path: out, Format: opts.Format, PartitionBy: opts.PartitionBy, StateRows: map[string]uint64{}}

	// Where things go: a directory through a Stage, or a temp file renamed.
	var pub publisher
	if opts.PartitionBy != "" {
		st, err := writer.BeginKind(out, opts.Force, nil, exportKind(opts.PartitionBy, opts.Format))
		if err != nil {
			return nil, err
		}
		pub = &dirPublisher{st: st}
		if len(m.WorkerStates) > 0 {
			em.WorkerStateFile = workerStateRel(opts.Format)
		}
	} else {
		fp, err := newFilePublisher(out, opts.Format, opts.Force)
		if err != nil {
			return nil, err
		}
		pub = fp
		if len(m.WorkerStates) > 0 {
			em.WorkerStateFile = workerSibling(filepath.Base(out), opts.Format)
			// Refused before anything is written, not after the data.
			if err := checkFileTarget(filepath.Join(filepath.Dir(out), em.WorkerStateFile), opts.Force); err != nil {
				return nil, err
			}
		}
	}
	ok := false
	defer func() {
		if !ok {
			pub.abort()
		}
	}()
	meta, err := metadata(m, em)
	if err != nil {
		return nil, err
	}
	cfg := sinkConfig{
		format: opts.Format, schema: rr.Schema(), compression: opts.Compression,
		rowGroupRows: opts.RowGroupRows, meta: meta, states: rr.States(), drop: map[string]bool{},
	}
	switch opts.PartitionBy {
	case "state":
		cfg.drop[reader.ColStep], cfg.drop[reader.ColState] = true, true
	case "bucket":
		cfg.drop[reader.ColBucket] = true
	}

	// Partitions are written a bounded number at a time, whatever the
	// bucket or state count: an open Parquet writer holds a row group's
	// pages, so a writer per partition grew memory with the partition count
	// (0.8 GB at 1024 buckets, >10 GB at 16384; "too many open files" at
	// 65536). Rows come in key order, bucket first, so a bucket partition
	// is complete when the next bucket begins and one writer is open at a
	// time. The states of a bucket interleave, so state partitions are
	// written maxStateWriters states per pass over the view.
	pw := &partWriters{pub: pub, cfg: cfg, by: opts.PartitionBy, ext: opts.Format.Ext(), open: map[string]sink{}, done: map[string]bool{}}
	defer func() {
		if !ok {
			pw.abort()
		}
	}()
	passes := 1
	if opts.PartitionBy == "state" {
		passes = max(1, (len(rr.States())+maxStateWriters-1)/maxStateWriters)
	}
	prog.Start(int64(rr.EstimatedBytes())*int64(passes), "export")
	defer prog.Finish()
	for pass := 0; pass < passes; pass++ {
		if pass > 0 {
			// A new view over the same selection (same schema and
			// dictionaries), keeping this pass's states.
			next, err := s.NewRecordReader(ctx, opts.View)
			if err != nil {
				return nil, err
			}
			rr.Close()
			rr = next
		}
		lo, hi := int32(pass*maxStateWriters), int32((pass+1)*maxStateWriters)
		for rr.Next() {
			rec := rr.Record()
			n := rec.NumRows()
			for r := int64(0); r < n; {
				part, end := partitionRun(rec, r, opts.PartitionBy)
				if opts.PartitionBy == "state" {
					if si := stateIndex(rec, r); si < lo || si >= hi {
						r = end
						continue
					}
				}
				sk, err := pw.sinkFor(part)
				if err != nil {
					return nil, err
				}
				if err := sk.write(rec, r, end); err != nil {
					return nil, err
				}
				countStates(rec, r, end, res.StateRows)
				res.Rows += uint64(end - r)
				r = end
			}
			prog.Add(reader.LogicalBytes(rec))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if err := rr.Err(); err != nil {
			return nil, err
		}
		if err := pw.closeAll(); err != nil {
			return nil, err
		}
	}
	if len(pw.order) == 0 && opts.PartitionBy == "" {
		// An empty selection still gives a readable file with the schema.
		if _, err := pw.sinkFor(""); err != nil {
			return nil, err
		}
		if err := pw.closeAll(); err != nil {
			return nil, err
		}
	}
	order := pw.order
	if opts.PartitionBy == "" {
		res.Files = []string{out}
	} else {
		res.Files = order
	}
	if em.WorkerStateFile != "" {
		rel := em.WorkerStateFile
		if opts.PartitionBy == "" {
			rel = "workers"
		}
		p, err := pub.path(rel)
		if err != nil {
			return nil, err
		}
		items, err := writeWorkerStateTable(ctx, s, p, opts.Format, opts.Compression, meta)
		if err != nil {
			return nil, err
		}
		res.WorkerStateItems = items
	}
	if err := pub.publish(); err != nil {
		return nil, err
	}
	ok = true
	res.Bytes = pub.size()
	if em.WorkerStateFile != "" {
		res.WorkerStateFile = filepath.Join(filepath.Dir(out), em.WorkerStateFile)
		if opts.PartitionBy != "" {
			res.WorkerStateFile = filepath.Join(out, filepath.FromSlash(em.WorkerStateFile))
		}
	}
	res.Elapsed = time.Since(start)
	res.ElapsedSeconds = res.Elapsed.Seconds()
	return res, nil
}

// rowsPerFile bounds, from the manifest, the rows one file of the export
// can receive: the selected buckets' entries (the largest bucket's when
// partitioned by bucket) and the selected states' (the largest state's when
// partitioned by state), whichever is less.
func rowsPerFile(s *reader.Snapshot, states []snapshotfmt.State, opts ExportOptions) uint64 {
	m := s.Manifest()
	lo, hi := uint32(0), m.Partitioning.Buckets-1
	if opts.View.BucketRange {
		lo, hi = max(lo, opts.View.BucketLo), min(hi, opts.View.BucketHi)
	}
	if opts.View.Width > 0 {
		wlo, whi, ok := s.WorkerBuckets(opts.View.Worker, opts.View.Width)
		if !ok {
			return 0
		}
		lo, hi = max(lo, wlo), min(hi, whi)
	}
	var byBuckets, maxBucket uint64
	for b := uint64(lo); b <= uint64(hi) && b < uint64(len(m.BucketEntries)); b++ {
		byBuckets += m.BucketEntries[b]
		maxBucket = max(maxBucket, m.BucketEntries[b])
	}
	var byStates, maxState uint64
	for _, st := range states {
		byStates += st.Entries
		maxState = max(maxState, st.Entries)
	}
	switch opts.PartitionBy {
	case "bucket":
		return min(maxBucket, byStates)
	case "state":
		return min(maxState, byBuckets)
	}
	return min(byBuckets, byStates)
}

// workerSibling names the per-worker state file beside an unpartitioned
// export: out.parquet -> out.workers.parquet.
func workerSibling(base string, f Format) string {
	return strings.TrimSuffix(base, filepath.Ext(base)) + ".workers" + f.Ext()
}

func exportMeta(m *snapshotfmt.Manifest, states []snapshotfmt.State, opts ExportOptions) *ExportMeta {
	em := &ExportMeta{
		Version: 1, Tool: opts.Tool, Partitioning: m.Partitioning, WidthAtWrite: m.WidthAtWrite,
		States: states, PartitionBy: opts.PartitionBy,
		Filter: ExportFilter{States: opts.View.States},
	}
	if opts.View.BucketRange {
		lo, hi := opts.View.BucketLo, opts.View.BucketHi
		em.Filter.BucketLo, em.Filter.BucketHi = &lo, &hi
	}
	if opts.View.Width > 0 {
		w := opts.View.Worker
		em.Filter.Worker, em.Filter.Width = &w, opts.View.Width
	}
	for _, ws := range m.WorkerStates {
		em.WorkerStates = append(em.WorkerStates, WorkerStateMeta{Step: ws.Step, Name: ws.Name, Rule: ws.Rule, Width: len(ws.Files)})
	}
	return em
}

func metadata(m *snapshotfmt.Manifest, em *ExportMeta) (map[string]string, error) {
	mc := *m // Encode seals its receiver; keep the reader's copy untouched
	man, err := mc.Encode()
	if err != nil {
		return nil, err
	}
	part, _ := json.Marshal(m.Partitioning)
	emb, err := json.Marshal(em)
	if err != nil {
		return nil, err
	}
	return map[string]string{MetaManifest: string(man), MetaPartitioning: string(part), MetaExport: string(emb)}, nil
}

// partitionRun returns the partition of row lo and the end of the run of
// rows sharing it. Rows come in key order (bucket, then state), so runs are
// long.
func partitionRun(rec arrow.Record, lo int64, by string) (string, int64) {
	n := rec.NumRows()
	switch by {
	case "bucket":
		b := rec.Column(0).(*array.Uint32)
		v := b.Value(int(lo))
		hi := lo + 1
		for hi < n && b.Value(int(hi)) == v {
			hi++
		}
		return "bucket=" + strconv.FormatUint(uint64(v), 10), hi
	case "state":
		st := rec.Column(2).(*array.Dictionary)
		v := st.GetValueIndex(int(lo))
		hi := lo + 1
		for hi < n && st.GetValueIndex(int(hi)) == v {
			hi++
		}
		step := dictString(rec.Column(1), int(lo))
		name := dictString(rec.Column(2), int(lo))
		return "step=" + url.PathEscape(step) + string(filepath.Separator) + "state=" + url.PathEscape(name), hi
	}
	return "", n
}

// testOnOpen, when set by a test, learns how many files are open after
// each one is created.
var testOnOpen func(open int)

// maxStateWriters bounds the state partitions written at once (one pass
// over the view each). A variable for tests.
var maxStateWriters = 16

// stateIndex is the state (index in the view's state dictionary) of row r.
func stateIndex(rec arrow.Record, r int64) int32 {
	return int32(rec.Column(2).(*array.Dictionary).GetValueIndex(int(r)))
}

// partWriters opens and closes the files of an export. In bucket mode a
// partition is closed as soon as another begins, so at most one file is
// open; a partition met again after it was closed means the view was not
// in bucket order, which only damaged input can cause.
type partWriters struct {
	pub   publisher
	cfg   sinkConfig
	by    string
	ext   string
	open  map[string]sink
	done  map[string]bool
	order []string // files in the order they were created, relative
	cur   string
}

func (pw *partWriters) sinkFor(part string) (sink, error) {
	if sk, ok := pw.open[part]; ok {
		return sk, nil
	}
	if pw.done[part] {
		return nil, fmt.Errorf("%w: the entries of partition %s are not contiguous in key order (the snapshot's files overlap or are out of order); verify the snapshot", snapshotfmt.ErrCorrupt, part)
	}
	if pw.by == "bucket" {
		if err := pw.closeAll(); err != nil {
			return nil, err
		}
	}
	rel := part
	if pw.by != "" {
		rel = filepath.Join(part, "part-00000"+pw.ext)
	}
	p, err := pw.pub.path(rel)
	if err != nil {
		return nil, err
	}
	sk, err := newSink(p, pw.cfg)
	if err != nil {
		return nil, err
	}
	pw.open[part] = sk
	pw.order = append(pw.order, rel)
	if testOnOpen != nil {
		testOnOpen(len(pw.open))
	}
	return sk, nil
}

// closeAll finishes every open file.
func (pw *partWriters) closeAll() error {
	for part, sk := range pw.open {
		delete(pw.open, part)
		pw.done[part] = true
		if err := sk.close(); err != nil {
			return err
		}
	}
	return nil
}

func (pw *partWriters) abort() {
	for part, sk := range pw.open {
		sk.abort()
		delete(pw.open, part)
	}
}

func countStates(rec arrow.Record, lo, hi int64, into map[string]uint64) {
	st := rec.Column(2).(*array.Dictionary)
	for r := lo; r < hi; {
		v := st.GetValueIndex(int(r))
		e := r + 1
		for e < hi && st.GetValueIndex(int(e)) == v {
			e++
		}
		into[dictString(rec.Column(1), int(r))+"/"+dictString(rec.Column(2), int(r))] += uint64(e - r)
		r = e
	}
}

// publisher hides the two ways an export is published.
type publisher interface {
	// path returns where to write rel (creating parent directories).
	path(rel string) (string, error)
	publish() error
	abort()
	size() int64
}

type dirPublisher struct {
	st    *writer.Stage
	bytes int64
}

func (d *dirPublisher) path(rel string) (string, error) {
	p := filepath.Join(d.st.Dir(), rel)
	if err := os.MkdirAll(filepath.Dir(p), fsx.DirPerm); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(p), err)
	}
	return p, nil
}

func (d *dirPublisher) publish() error {
	d.bytes = dirSize(d.st.Dir())
	// Directories were created after the files' fsync; make them durable.
	_ = filepath.WalkDir(d.st.Dir(), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			if f, err := os.Open(p); err == nil {
				f.Sync()
				f.Close()
			}
		}
		return nil
	})
	return d.st.Publish()
}

func (d *dirPublisher) abort()      { d.st.Abort() }
func (d *dirPublisher) size() int64 { return d.bytes }

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// filePublisher writes the data file and its per-worker sibling under
// temporary names beside the target and renames both at publish (data file
// last, so a complete data file never points at a missing sibling).
type filePublisher struct {
	target string
	format Format
	force  bool
	tmps   map[string]string      // rel -> temp path
	dirs   map[string]*fsx.RunDir // rel -> the run directory holding it
	final  map[string]string      // rel -> final path
	order  []string
	bytes  int64
}

func newFilePublisher(target string, format Format, force bool) (*filePublisher, error) {
	if err := checkFileTarget(target, force); err != nil {
		return nil, err
	}
	if st, err := os.Stat(filepath.Dir(target)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: the directory of %s does not exist; create it first", snapshotfmt.ErrInvalidArgument, target)
	}
	return &filePublisher{target: target, format: format, force: force, tmps: map[string]string{}, dirs: map[string]*fsx.RunDir{}, final: map[string]string{}}, nil
}

// checkFileTarget refuses an existing target unless force, and under force
// anything but a regular file. Lstat: --force replaces the name, never
// what a link points to, and never a device node or a FIFO.
func checkFileTarget(target string, force bool) error {
	if st, err := os.Lstat(target); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%w: %s is a directory; an unpartitioned export writes one file", snapshotfmt.ErrRefused, target)
		}
		if !force {
			return fmt.Errorf("%w: %s exists (use --force to replace it)", snapshotfmt.ErrRefused, target)
		}
		return writer.CheckReplaceFile(target)
	} else if errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: target %s: a part of its directory is not a directory; create the directory first", snapshotfmt.ErrInvalidArgument, target)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stat %s: %w", target, err)
	}
	return nil
}

// path: rel "" is the data file, "workers" its per-worker sibling.
func (f *filePublisher) path(rel string) (string, error) {
	final := f.target
	if rel == "workers" {
		// Named by the format written, as the metadata and the report
		// name it, whatever the target's extension.
		final = filepath.Join(filepath.Dir(f.target), workerSibling(filepath.Base(f.target), f.format))
		if _, err := os.Lstat(final); err == nil && !f.force {
			return "", fmt.Errorf("%w: %s exists (use --force to replace it)", snapshotfmt.ErrRefused, final)
		}
		if err := writer.CheckReplaceFile(final); err != nil {
			return "", err
		}
	}
	// The file is written in a run directory beside its final name, locked
	// for this run's life: a run killed before it renamed or removed its
	// file leaves one that the next run removes, and no run removes a live
	// one's, even from another PID namespace.
	prefix := "." + filepath.Base(final) + ".rebucket-tmp-"
	fsx.RemoveStale(nil, filepath.Dir(final), prefix)
	d, err := fsx.MkdirRun(nil, filepath.Dir(final), prefix, fsx.DirPerm)
	if err != nil {
		return "", fmt.Errorf("create a temporary directory beside %s: %w", final, err)
	}
	tmp := filepath.Join(d.Path, filepath.Base(final))
	f.tmps[rel], f.dirs[rel], f.final[rel] = tmp, d, final
	f.order = append(f.order, rel)
	return tmp, nil
}

func (f *filePublisher) publish() error {
	// Sibling first, data file last.
	for i := len(f.order) - 1; i >= 0; i-- {
		rel := f.order[i]
		if st, err := os.Stat(f.tmps[rel]); err == nil {
			f.bytes += st.Size()
		}
		if err := os.Rename(f.tmps[rel], f.final[rel]); err != nil {
			return fmt.Errorf("publish %s: %w", f.final[rel], err)
		}
		delete(f.tmps, rel)
		f.dirs[rel].Remove()
		delete(f.dirs, rel)
	}
	if d, err := os.Open(filepath.Dir(f.target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func (f *filePublisher) abort() {
	for _, d := range f.dirs {
		d.Remove()
	}
}

func (f *filePublisher) size() int64 { return f.bytes }
