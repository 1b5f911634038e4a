package reader

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Layout of one worker's directory built by BuildStore:
//
//	DIR/store/          the worker's Pebble store (pebble/v2, FormatNewest)
//	DIR/state/STEP.NAME its per-worker states after redistribution, one
//	                    file per state, items length-prefixed as in a
//	                    snapshot (snapshotfmt.EncodeWorkerItems); step and
//	                    name are path-escaped
const (
	StoreDir = "store"
	StateDir = "state"
	// stagingDir holds links, copies and clipped tables until Pebble
	// ingests them (ingest removes them); it is removed afterwards.
	stagingDir = "ingest"
)

// StoreStats is what building one worker's store did.
type StoreStats struct {
	Worker   int  `json:"worker"`
	Owns     bool `json:"owns_state"`
	BucketLo int  `json:"bucket_lo"`
	BucketHi int  `json:"bucket_hi"`
	Buckets  int  `json:"buckets"`
	// Entries and Bytes are the worker's share by the manifest's per-bucket
	// stats (bytes are logical: encoded key plus value).
	Entries uint64 `json:"entries"`
	Bytes   uint64 `json:"bytes"`
	// IngestedFiles were wholly inside the range and ingested as they are
	// (hard-linked or copied first); RewrittenFiles straddled the range and
	// their in-range entries were rewritten into new tables.
	IngestedFiles  int   `json:"ingested_files"`
	IngestedBytes  int64 `json:"ingested_bytes"`
	LinkedFiles    int   `json:"linked_files"` // of IngestedFiles, hard-linked rather than copied
	RewrittenFiles int   `json:"rewritten_files"`
	// ExcisedFiles straddled the range and were ingested whole, the parts
	// outside it excised (ClipExcise).
	ExcisedFiles     int    `json:"excised_files"`
	RewrittenEntries uint64 `json:"rewritten_entries"`
	// The times are reported in seconds by the command (load's report).
	PrepareTime time.Duration `json:"-"` // link or copy, and checksum
	RewriteTime time.Duration `json:"-"`
	IngestTime  time.Duration `json:"-"`
	Time        time.Duration `json:"-"`
	StateFiles  []string      `json:"state_files"`
}

// quietLogger keeps Pebble from writing to the process's log: a library
// never prints.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// StoreOptions are the Pebble options BuildStore and OpenStore use. The
// store's format must accept the snapshot's Pebblev4 tables for ingest;
// FormatNewest does (its MinTableFormat is Pebblev1).
func StoreOptions() *pebble.Options {
	return &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{},
		FS: storeVFS} // 0750/0640, not Pebble's 0755/0666
}

// OpenStore opens a worker store that BuildStore built.
func OpenStore(dir string) (*pebble.DB, error) {
	db, err := pebble.Open(filepath.Join(dir, StoreDir), StoreOptions())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return db, nil
}

// BuildStore builds worker i's local state in dir (which must not exist or
// be empty) as a restarting job would: a Pebble store holding exactly the
// entries of the worker's buckets, and its per-worker states. Data files
// that lie wholly inside the worker's range are ingested as files (the
// snapshot's file is hard-linked, or copied across filesystems, into a
// staging directory first, because ingest takes ownership of what it is
// given: the snapshot itself is never handed to Pebble); files that
// straddle the range are clipped: their in-range entries are rewritten into
// a new table, which is ingested. A file's whole-file checksum is checked
// before Pebble sees it (unless the snapshot was opened with SkipChecksums).
// On error dir is left as it is, for the caller to remove (rebucket load
// builds every worker inside one staged directory and drops it whole).
func (l *Loader) BuildStore(ctx context.Context, i int, dir string) (StoreStats, error) {
	return l.BuildStoreWith(ctx, i, dir, BuildOptions{})
}

// ClipMode is how BuildStore takes the in-range part of a data file that
// straddles a worker's range.
type ClipMode string

const (
	// ClipRewrite rewrites the in-range entries into a new table and
	// ingests that: the store holds only its own data (the default).
	ClipRewrite ClipMode = "rewrite"
	// ClipExcise ingests the whole file (linked or copied) and then excises
	// the key spans outside the range, which Pebble does by turning the
	// table into virtual tables over the same backing file: nothing is
	// rewritten, but the store keeps the whole file on disk until its
	// compactions rewrite it (free with hard links on one filesystem, a
	// full copy per worker otherwise).
	ClipExcise ClipMode = "excise"
)

// ParseClipMode accepts rewrite or excise ("" is rewrite).
func ParseClipMode(s string) (ClipMode, error) {
	switch ClipMode(s) {
	case "":
		return ClipRewrite, nil
	case ClipRewrite, ClipExcise:
		return ClipMode(s), nil
	}
	return "", fmt.Errorf("%w: clip mode %q: want rewrite or excise", snapshotfmt.ErrInvalidArgument, s)
}

// BuildOptions tune BuildStoreWith. The zero value is BuildStore's.
type BuildOptions struct {
	Clip ClipMode
	// StoreFS, when set, is the file system Pebble's store uses (tests
	// inject faults into Pebble's own writes through it).
	StoreFS vfs.FS
}

// BuildStoreWith is BuildStore with options.
func (l *Loader) BuildStoreWith(ctx context.Context, i int, dir string, opts BuildOptions) (StoreStats, error) {
	start := time.Now()
	if _, err := ParseClipMode(string(opts.Clip)); err != nil {
		return StoreStats{}, err
	}
	part, err := l.Worker(i)
	if err != nil {
		return StoreStats{}, err
	}
	st := StoreStats{Worker: i, Owns: part.Owns, BucketLo: part.BucketLo, BucketHi: part.BucketHi, StateFiles: []string{}}
	if err := os.MkdirAll(dir, fsx.DirPerm); err != nil {
		return st, fmt.Errorf("create %s: %w", dir, err)
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return st, fmt.Errorf("read %s: %w", dir, err)
	} else if len(ents) > 0 {
		return st, fmt.Errorf("%w: worker directory %s is not empty", snapshotfmt.ErrRefused, dir)
	}
	if part.Owns {
		st.Buckets = part.BucketHi - part.BucketLo + 1
		for b := part.BucketLo; b <= part.BucketHi; b++ {
			st.Entries += l.s.m.BucketEntries[b]
			st.Bytes += l.s.m.BucketBytes[b]
		}
	}
	db, err := openSafeStore(filepath.Join(dir, StoreDir), opts.StoreFS, false)
	if err != nil {
		return st, fmt.Errorf("create store in %s: %w", dir, err)
	}
	if err := l.fillStore(ctx, db, part, filepath.Join(dir, stagingDir), opts, &st); err != nil {
		db.Close("close store in " + dir)
		return st, err
	}
	if err := db.Close("close store in " + dir); err != nil {
		return st, err
	}
	if err := l.writeStates(i, filepath.Join(dir, StateDir), &st); err != nil {
		return st, err
	}
	st.Time = time.Since(start)
	return st, nil
}

func (l *Loader) fillStore(ctx context.Context, db *safeStore, part WorkerPart, staging string, opts BuildOptions, st *StoreStats) error {
	if !part.Owns || len(part.Files) == 0 {
		return nil
	}
	fsys := fsx.Or(l.s.opts.FS)
	if err := fsys.Mkdir(staging, fsx.DirPerm); err != nil {
		return fmt.Errorf("create %s: %w", staging, err)
	}
	defer fsys.RemoveAll(staging)
	lower := snapshotfmt.BucketPrefix(uint32(part.BucketLo))
	upper := snapshotfmt.BucketUpperBound(uint32(part.BucketHi))
	var paths []string
	for k, fp := range part.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := filepath.Join(staging, fmt.Sprintf("%06d.sst", k))
		if !fp.Whole && opts.Clip == ClipExcise {
			t := time.Now()
			if err := l.validateTable(ctx, fp.File); err != nil {
				return err
			}
			linked, err := l.stageWhole(fp.File, dst)
			if err != nil {
				return err
			}
			st.PrepareTime += time.Since(t)
			st.ExcisedFiles++
			if linked {
				st.LinkedFiles++
			}
			paths = append(paths, dst)
			continue
		}
		if fp.Whole {
			t := time.Now()
			if err := l.validateTable(ctx, fp.File); err != nil {
				return err
			}
			linked, err := l.stageWhole(fp.File, dst)
			if err != nil {
				return err
			}
			st.PrepareTime += time.Since(t)
			st.IngestedFiles++
			st.IngestedBytes += fp.File.Size
			if linked {
				st.LinkedFiles++
			}
			paths = append(paths, dst)
			continue
		}
		t := time.Now()
		n, err := l.clip(ctx, fp.File, lower, upper, dst)
		if err != nil {
			return err
		}
		st.RewriteTime += time.Since(t)
		st.RewrittenFiles++
		st.RewrittenEntries += n
		if n > 0 {
			paths = append(paths, dst)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	// Files never overlap in key range, and clipped parts stay inside
	// their files' ranges, so one ingest takes them all.
	t := time.Now()
	if err := db.do(fmt.Sprintf("ingest %d files", len(paths)), func(db *pebble.DB) error { return db.Ingest(ctx, paths) }); err != nil {
		return err
	}
	if st.ExcisedFiles > 0 {
		// Cut away what lies outside the range, below and above it.
		first := part.Files[0].File.SmallestKey()
		last := append(part.Files[len(part.Files)-1].File.LargestKey(), 0)
		if bytes.Compare(first, lower) < 0 {
			if err := db.do(fmt.Sprintf("excise below bucket %d", part.BucketLo), func(db *pebble.DB) error {
				return db.Excise(ctx, pebble.KeyRange{Start: first, End: lower})
			}); err != nil {
				return err
			}
		}
		if upper != nil && bytes.Compare(last, upper) > 0 {
			if err := db.do(fmt.Sprintf("excise above bucket %d", part.BucketHi), func(db *pebble.DB) error {
				return db.Excise(ctx, pebble.KeyRange{Start: upper, End: last})
			}); err != nil {
				return err
			}
		}
	}
	st.IngestTime = time.Since(t)
	return nil
}

// stageWhole puts a checked copy of a snapshot file at dst for ingest: a
// hard link when the filesystem allows (Pebble only ever links to and
// unlinks an ingested file, never writes it), else a copy.
func (l *Loader) stageWhole(df snapshotfmt.DataFile, dst string) (linked bool, err error) {
	src := l.s // checks the checksum
	if _, ok := l.verified.Load(df.Path); ok {
		src = l.trusted // another worker checked this file already
	}
	f, err := src.OpenListed(df.Path, df.Size, df.Checksum)
	if err != nil {
		return false, err
	}
	defer f.Close()
	l.verified.Store(df.Path, struct{}{})
	fsys := fsx.Or(l.s.opts.FS)
	if err := fsys.Link(l.s.Path(df.Path), dst); err == nil {
		// Make sure the link names the file we checked, not one swapped in
		// meanwhile.
		a, e1 := f.Stat()
		b, e2 := os.Lstat(dst)
		if e1 == nil && e2 == nil && os.SameFile(a, b) {
			return true, nil
		}
		fsys.Remove(dst)
	}
	out, err := fsx.Create(fsys, dst, fsx.FilePerm)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", dst, err)
	}
	if _, err := io.Copy(out, io.NewSectionReader(l.s.readerOf(f), 0, df.Size)); err != nil {
		out.Close()
		return false, fmt.Errorf("copy %s to %s: %w", df.Path, dst, err)
	}
	// Pebble's ingest links the file into the store: make the copy
	// durable first.
	if err := out.Sync(); err != nil {
		out.Close()
		return false, fmt.Errorf("copy %s to %s: %w", df.Path, dst, err)
	}
	if err := out.Close(); err != nil {
		return false, fmt.Errorf("close %s: %w", dst, err)
	}
	return false, nil
}

// clip writes the entries of df inside [lower, upper) to a new table at
// dst and returns how many it wrote.
func (l *Loader) clip(ctx context.Context, df snapshotfmt.DataFile, lower, upper []byte, dst string) (uint64, error) {
	fi, err := l.openChecked(ctx, df, lower, upper)
	if err != nil {
		return 0, err
	}
	defer fi.Close()
	fsys := fsx.Or(l.s.opts.FS)
	f, err := fsx.Create(fsys, dst, fsx.FilePerm)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", dst, err)
	}
	w := sstable.NewWriter(&fileWritable{f: f, bw: bufio.NewWriterSize(f, 256<<10)}, sstable.WriterOptions{
		TableFormat: sstable.TableFormatPebblev4, Compression: clipCompression(ctx, fi),
		// As the writer's: fewer blocks to build now and to read later.
		BlockSize: 32 << 10, IndexBlockSize: 32 << 10,
	})
	var n uint64
	for fi.Next() {
		if err := w.Set(fi.Key(), fi.Value()); err != nil {
			w.Close()
			return 0, fmt.Errorf("write %s: %w", dst, err)
		}
		n++
	}
	if err := fi.Err(); err != nil {
		w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("finish %s: %w", dst, err)
	}
	if n == 0 {
		fsys.Remove(dst)
	}
	return n, nil
}

// clipCompression is the compression of a clipped table: none if the
// snapshot's file has none (the user chose CPU over bytes), else snappy.
// A properties block that cannot be read means snappy: the entries
// themselves are checked as they are read.
func clipCompression(ctx context.Context, fi *FileIter) *sstable.CompressionProfile {
	if p, err := fi.r.ReadPropertiesBlock(ctx, nil); err == nil && p.CompressionName == sstable.NoCompression.Name {
		return sstable.NoCompression
	}
	return sstable.SnappyCompression
}

func (l *Loader) writeStates(i int, dir string, st *StoreStats) error {
	states, err := l.WorkerState(i)
	if err != nil {
		return err
	}
	fsys := fsx.Or(l.s.opts.FS)
	if err := fsys.Mkdir(dir, fsx.DirPerm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, ws := range states {
		name := StateFileName(ws.Step, ws.Name)
		if err := writeFileSync(fsys, filepath.Join(dir, name), snapshotfmt.EncodeWorkerItems(ws.Items)); err != nil {
			return fmt.Errorf("write per-worker state %s: %w", ws.QualifiedName(), err)
		}
		st.StateFiles = append(st.StateFiles, StateDir+"/"+name)
	}
	return nil
}

// StateFileName is the file name of a per-worker state in a worker's
// state directory.
func StateFileName(step, name string) string {
	return url.PathEscape(step) + "." + url.PathEscape(name)
}

// StoreCheck is what a built store holds, read back from Pebble.
type StoreCheck struct {
	Entries uint64 `json:"entries"`
	// Outside counts entries whose bucket is not the worker's.
	Outside uint64 `json:"outside"`
}

// CheckStore counts the entries of worker i's store in dir and those that
// lie outside the worker's bucket range. With every worker checked, counts
// that add up to the manifest's and no entry outside mean every entry is in
// exactly one store, its owner's (the snapshot holds no duplicate key, and
// the ranges are disjoint).
func (l *Loader) CheckStore(ctx context.Context, i int, dir string) (StoreCheck, error) {
	return l.CheckStoreWith(ctx, i, dir, BuildOptions{})
}

// CheckStoreWith is CheckStore reading through opts.StoreFS. The store is
// opened read-only: checking it changes nothing.
func (l *Loader) CheckStoreWith(ctx context.Context, i int, dir string, opts BuildOptions) (StoreCheck, error) {
	var c StoreCheck
	lo, hi, ok := l.a.Range(i)
	db, err := openSafeStore(filepath.Join(dir, StoreDir), opts.StoreFS, true)
	if err != nil {
		return c, err
	}
	defer db.Close("close store " + dir)
	var lower, upper []byte
	if ok {
		lower, upper = snapshotfmt.BucketPrefix(lo), snapshotfmt.BucketUpperBound(hi)
	}
	err = db.do("iterate store "+dir, func(db *pebble.DB) error {
		it, err := db.NewIter(nil)
		if err != nil {
			return err
		}
		for valid := it.First(); valid; valid = it.Next() {
			if c.Entries%65536 == 0 {
				if err := ctx.Err(); err != nil {
					it.Close()
					return err
				}
			}
			c.Entries++
			k := it.Key()
			if !ok || bytes.Compare(k, lower) < 0 || (upper != nil && bytes.Compare(k, upper) >= 0) {
				c.Outside++
			}
		}
		err = it.Error()
		if e := it.Close(); err == nil {
			err = e
		}
		return err
	})
	return c, err
}

// ErrLoadMismatch marks stores that do not hold the snapshot's entries
// exactly once. The files passed their checksums, so the manifest's counts
// disagree with its data: damaged input (ErrCorrupt, exit 2).
var ErrLoadMismatch = fmt.Errorf("%w: worker stores do not match the snapshot", snapshotfmt.ErrCorrupt)

// fileWritable is an objstorage.Writable over an fsx.File: buffered
// writes, fsync at Finish.
type fileWritable struct {
	f  fsx.File
	bw *bufio.Writer
}

func (w *fileWritable) Write(p []byte) error {
	_, err := w.bw.Write(p)
	return err
}

func (w *fileWritable) Finish() error {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *fileWritable) Abort() { w.f.Close() }

// writeFileSync writes a new file and fsyncs it.
func writeFileSync(fsys fsx.FS, p string, data []byte) error {
	f, err := fsx.Create(fsys, p, fsx.FilePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
