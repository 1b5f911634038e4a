package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// DeepMode chooses whether Check scans every entry.
type DeepMode int

const (
	// DeepAuto scans when the data files total at most DeepAutoLimit, which
	// reads in about a minute on an ordinary disk.
	DeepAuto DeepMode = iota
	DeepOn
	DeepOff
)

// DeepAutoLimit is the data size up to which DeepAuto scans.
const DeepAutoLimit = 2 << 30

// DefaultMaxPerKind is how many findings of one kind one file lists before
// the rest are only counted.
const DefaultMaxPerKind = 10

// Options tune Check. The zero value checks the manifest and every file's
// size and checksum, and scans entries when the data is small enough.
type Options struct {
	Deep DeepMode
	// Width, when above 0, also checks whether a start at this width can
	// load the snapshot.
	Width int
	// Parallelism is how many files are read at once (default GOMAXPROCS).
	Parallelism int
	// MaxPerKind bounds the findings of one kind listed per file (default
	// DefaultMaxPerKind); the rest are counted in the summary.
	MaxPerKind int
	Progress   progress.Reporter
	// FS, when it wraps files (fsx.Faulty), sees every read of a listed
	// file: tests inject I/O errors through it.
	FS fsx.FS
}

// WidthReport answers whether a start at Width can load the snapshot.
type WidthReport struct {
	Width    int            `json:"width"`
	Buckets  int            `json:"buckets"`
	Loadable bool           `json:"loadable"`
	Idle     []int          `json:"idle_workers"`
	Load     plan.WidthLoad `json:"load"`
}

// Summary is the outcome of Check.
type Summary struct {
	Snapshot   string       `json:"snapshot"`
	Verified   bool         `json:"verified"`
	Deep       bool         `json:"deep"`
	DeepReason string       `json:"deep_reason"`
	DataFiles  int          `json:"data_files"`
	WorkerFile int          `json:"worker_files"`
	Entries    uint64       `json:"entries_scanned"`
	BytesRead  int64        `json:"bytes_read"`
	Errors     int          `json:"errors"`
	Warnings   int          `json:"warnings"`
	ByKind     map[Kind]int `json:"by_kind"`
	// NotCompared lists what could not be checked because the files it
	// depends on were unreadable (their findings say why).
	NotCompared []string      `json:"not_compared,omitempty"`
	Width       *WidthReport  `json:"width,omitempty"`
	Elapsed     time.Duration `json:"-"`
	Seconds     float64       `json:"elapsed_seconds"`
}

// emitter serializes the sink and counts findings.
type emitter struct {
	mu       sync.Mutex
	sink     Sink
	errors   int
	warnings int
	byKind   map[Kind]int
}

func newEmitter(sink Sink) *emitter {
	if sink == nil {
		sink = func(Finding) {}
	}
	return &emitter{sink: sink, byKind: map[Kind]int{}}
}

func (e *emitter) emit(f Finding) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count(f.Kind, f.Severity, 1)
	e.sink(f)
}

// count records n findings that are not listed one by one.
func (e *emitter) count(k Kind, sev Severity, n int) {
	e.byKind[k] += n
	if sev == SevError {
		e.errors += n
	} else {
		e.warnings += n
	}
}

// Check verifies the snapshot at dir and streams every finding to sink.
// It returns an error only when it could not run: the manifest is missing,
// unreadable or untrustworthy (also reported as a finding, wrapping the
// snapshotfmt error class), a bad option, or cancellation. Summary.Verified
// is false when any error-severity finding was reported.
func Check(ctx context.Context, dir string, opts Options, sink Sink) (*Summary, error) {
	start := time.Now()
	if opts.Width < 0 || opts.Width > snapshotfmt.MaxWidth {
		return nil, fmt.Errorf("%w: width %d: want 1..%d", snapshotfmt.ErrInvalidArgument, opts.Width, snapshotfmt.MaxWidth)
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.MaxPerKind <= 0 {
		opts.MaxPerKind = DefaultMaxPerKind
	}
	pr := progress.OrNop(opts.Progress)
	em := newEmitter(sink)
	sum := &Summary{Snapshot: dir}
	finish := func() *Summary {
		sum.Errors, sum.Warnings, sum.ByKind = em.errors, em.warnings, em.byKind
		sum.Verified = em.errors == 0
		sum.Elapsed = time.Since(start)
		sum.Seconds = sum.Elapsed.Seconds()
		return sum
	}
	snap, err := openManifest(dir, em)
	if err != nil {
		return finish(), err
	}
	m := snap.Manifest()
	switch {
	case opts.Deep == DeepOn:
		sum.Deep, sum.DeepReason = true, "requested"
	case opts.Deep == DeepOff:
		sum.DeepReason = "not requested: sizes and checksums only"
	case m.DataBytes() <= DeepAutoLimit:
		sum.Deep = true
		sum.DeepReason = fmt.Sprintf("automatic: %s of data is under %s (about a minute to read)", units.Bytes(m.DataBytes()), units.Bytes(DeepAutoLimit))
	default:
		sum.DeepReason = fmt.Sprintf("skipped: %s of data is over %s; request it with --deep", units.Bytes(m.DataBytes()), units.Bytes(DeepAutoLimit))
	}
	c := &checker{ctx: ctx, snap: snap, m: m, opts: opts, em: em, deep: sum.Deep, pr: pr}
	c.states = make([]*snapshotfmt.State, 1<<16)
	for i := range m.States {
		c.states[m.States[i].ID] = &m.States[i]
	}
	if err := c.run(sum); err != nil {
		return finish(), err
	}
	if err := c.failure(); err != nil {
		// A file that could not be read was not checked: the run failed
		// (exit 4), whatever it found elsewhere; the finding names it.
		return finish(), err
	}
	if opts.Width > 0 {
		sum.Width = checkWidth(m, opts.Width, em)
	}
	return finish(), ctx.Err()
}

// openManifest opens the snapshot and, when its manifest cannot be used,
// reports one finding naming exactly why and returns the error.
func openManifest(dir string, em *emitter) (*reader.Snapshot, error) {
	// verify reports entries in the wrong bucket as findings (its deep
	// scan, and Equal's Misplaced), so it reads them rather than stopping.
	snap, err := reader.Open(dir, reader.Options{AllowMisplaced: true})
	if err == nil {
		return snap, nil
	}
	kind := ManifestUnreadable
	switch {
	case errors.Is(err, snapshotfmt.ErrNotFound):
		kind = ManifestMissing
	case errors.Is(err, snapshotfmt.ErrUnsupported):
		kind = ManifestUnsupported
	case errors.Is(err, snapshotfmt.ErrTooLarge):
		kind = ManifestTooLarge
	case errors.Is(err, snapshotfmt.ErrCorrupt):
		kind = classifyManifest(filepath.Join(dir, snapshotfmt.ManifestName))
	}
	f := newFinding(kind, SevError, "%v", err)
	f.File = snapshotfmt.ManifestName
	em.emit(f)
	return nil, err
}

// classifyManifest tells a torn manifest from an edited one and from one
// that is sealed but inconsistent, so the finding says which.
func classifyManifest(p string) Kind {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > snapshotfmt.MaxManifestSize {
		return ManifestTorn
	}
	data, err := fsx.ReadRegular(p, snapshotfmt.MaxManifestSize)
	if err != nil {
		return ManifestUnreadable
	}
	var m snapshotfmt.Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return ManifestTorn
	}
	c := m
	c.Checksum = ""
	if _, err := c.Encode(); err != nil || c.Checksum != m.Checksum {
		return ManifestChecksum
	}
	return ManifestInconsistent
}

func checkWidth(m *snapshotfmt.Manifest, w int, em *emitter) *WidthReport {
	n := int(m.Partitioning.Buckets)
	load := plan.LoadAt(m, w)
	wr := &WidthReport{Width: w, Buckets: n, Loadable: w <= n, Idle: load.Idle, Load: load}
	if w > n {
		f := newFinding(WidthAboveBuckets, SevError,
			"a start at width %d cannot own state with %d buckets: at most %d workers can (under --on-excess idle, workers %s would own nothing); %s",
			w, n, n, plan.FormatRanges(load.IdleRanges, 16), snapshotfmt.RaiseHint(w, n))
		em.emit(f)
	}
	return wr
}

type checker struct {
	ctx    context.Context
	snap   *reader.Snapshot
	m      *snapshotfmt.Manifest
	opts   Options
	em     *emitter
	deep   bool
	pr     progress.Reporter
	states []*snapshotfmt.State

	failMu  sync.Mutex
	failErr error // the first I/O error reading a listed file
}

// fileResult is what the scan of one data file found.
type fileResult struct {
	sound   bool // checksum matched and, if deep, the scan ran to the end
	outside [][]byte
}

// scanStats is one goroutine's per-bucket and per-state tallies.
type scanStats struct {
	bucketEntries []uint64
	bucketBytes   []uint64
	stateEntries  []uint64
	entries       uint64
	bytesRead     int64
}

// readFailed records an I/O error reading rel: not damage, a failure of
// the run.
func (c *checker) readFailed(rel string, err error) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if c.failErr == nil {
		c.failErr = fmt.Errorf("could not read %s: %w", rel, err)
	}
}

// tableErrKind classifies an error reading a table whose checksum
// matched: an I/O error fails the run, anything else is damage.
func (c *checker) tableErrKind(rel string, err error) Kind {
	if isReadFailure(err) {
		c.readFailed(rel, err)
		return FileUnreadable
	}
	return TableCorrupt
}

func (c *checker) failure() error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failErr
}

// isReadFailure tells an error of the operating system (EIO, EACCES, a
// vanished device) from damage in what was read. Pebble wraps the errors
// of its reads, so they are unwrapped, not matched by type at the top.
func isReadFailure(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

func (c *checker) run(sum *Summary) error {
	m := c.m
	sum.DataFiles = len(m.Files)
	for _, ws := range m.WorkerStates {
		sum.WorkerFile += len(ws.Files)
	}
	var total int64
	for _, f := range m.Files {
		total += f.Size
	}
	c.pr.Start(total, "verify "+c.snap.Dir())
	defer c.pr.Finish()

	c.unlisted()

	n := int(m.Partitioning.Buckets)
	results := make([]fileResult, len(m.Files))
	jobs := make(chan int)
	var wg sync.WaitGroup
	stats := make([]*scanStats, c.opts.Parallelism)
	for w := range stats {
		st := &scanStats{}
		if c.deep {
			st.bucketEntries, st.bucketBytes = make([]uint64, n), make([]uint64, n)
			st.stateEntries = make([]uint64, 1<<16)
		}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = c.checkDataFile(m.Files[i], st)
			}
		}()
	}
	for i := range m.Files {
		if c.ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err := c.ctx.Err(); err != nil {
		return err
	}
	for _, ws := range m.WorkerStates {
		for _, wf := range ws.Files {
			c.checkWorkerFile(ws, wf)
		}
	}
	for _, st := range stats {
		sum.Entries += st.entries
		sum.BytesRead += st.bytesRead
	}
	if !c.deep {
		return nil
	}
	c.duplicates(results)
	c.compareStats(results, stats, sum)
	return nil
}

// unlisted warns of files in data/ and workers/ that the manifest does not
// list: leftovers of a failed write, or files copied in by hand.
func (c *checker) unlisted() {
	listed := map[string]bool{}
	for _, f := range c.m.Files {
		listed[f.Path] = true
	}
	for _, ws := range c.m.WorkerStates {
		for _, f := range ws.Files {
			listed[f.Path] = true
		}
	}
	for _, d := range []string{snapshotfmt.DataDir, snapshotfmt.WorkersDir} {
		ents, err := os.ReadDir(c.snap.Path(d))
		if err != nil {
			continue // a missing directory shows as missing files
		}
		for _, e := range ents {
			rel := d + "/" + e.Name()
			if !listed[rel] {
				f := newFinding(UnlistedFile, SevWarning, "not listed in the manifest: a leftover of an interrupted write, or copied in by hand; the loader ignores it")
				f.File = rel
				c.em.emit(f)
			}
		}
	}
}

// openChecked opens a listed file and checks presence, type, size and
// whole-file checksum, reporting what is wrong. It returns nil when the
// file must not be read further.
func (c *checker) openChecked(rel string, size int64, checksum string, bucket int64, st *scanStats) fsx.File {
	report := func(kind Kind, format string, args ...any) {
		f := newFinding(kind, SevError, format, args...)
		f.File, f.Bucket = rel, bucket
		c.em.emit(f)
	}
	unreadable := func(err error) {
		c.readFailed(rel, err)
		report(FileUnreadable, "%v", err)
	}
	// No symbolic link is followed, at the file or its directory.
	fh, err := c.snap.OpenInside(rel)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			report(FileMissing, "listed in the manifest but missing")
		case errors.Is(err, snapshotfmt.ErrCorrupt):
			report(FileNotRegular, "%v", err)
		default:
			unreadable(err)
		}
		return nil
	}
	info, err := fh.Stat()
	if err != nil {
		fh.Close()
		unreadable(err)
		return nil
	}
	if !info.Mode().IsRegular() {
		fh.Close()
		report(FileNotRegular, "is not a regular file (%s)", info.Mode().Type())
		return nil
	}
	if info.Size() != size {
		fh.Close()
		report(FileSize, "is %d bytes, the manifest says %d (truncated, extended or replaced)", info.Size(), size)
		return nil
	}
	var file fsx.File = fh
	if w, ok := c.opts.FS.(interface{ Wrap(fsx.File) fsx.File }); ok {
		file = w.Wrap(fh)
	}
	h := xxh3.New()
	n, err := io.Copy(h, &progressReader{r: io.NewSectionReader(file, 0, size), pr: c.pr})
	if st != nil {
		st.bytesRead += n
	}
	if err != nil {
		fh.Close()
		unreadable(fmt.Errorf("read: %w", err))
		return nil
	}
	if got := snapshotfmt.Sum128Hex(h.Sum128()); got != checksum {
		fh.Close()
		report(FileChecksum, "checksum is %s, the manifest says %s: the file is damaged (it was not opened as a table)", got, checksum)
		return nil
	}
	return file
}

type progressReader struct {
	r  io.Reader
	pr progress.Reporter
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pr.Add(int64(n))
	return n, err
}

func (c *checker) checkWorkerFile(ws snapshotfmt.WorkerState, wf snapshotfmt.WorkerFile) {
	fh := c.openChecked(wf.Path, wf.Size, wf.Checksum, -1, nil)
	if fh == nil {
		return
	}
	defer fh.Close()
	data := make([]byte, wf.Size) // size matched the manifest, which is bounded
	if _, err := fh.ReadAt(data, 0); err != nil {
		c.readFailed(wf.Path, err)
		f := newFinding(FileUnreadable, SevError, "read: %v", err)
		f.File = wf.Path
		c.em.emit(f)
		return
	}
	items, err := snapshotfmt.DecodeWorkerItems(data)
	if err == nil && uint64(len(items)) != wf.Items {
		err = fmt.Errorf("holds %d items, the manifest says %d", len(items), wf.Items)
	}
	if err != nil {
		f := newFinding(WorkerItems, SevError, "per-worker state %s, worker %d: %v", ws.QualifiedName(), wf.Worker, err)
		f.File, f.State = wf.Path, ws.QualifiedName()
		c.em.emit(f)
	}
}

// capper lists at most max findings of one kind for one file and counts
// the rest.
type capper struct {
	em   *emitter
	file string
	max  int
	seen map[Kind]int
	sev  map[Kind]Severity
}

func (cp *capper) emit(f Finding) {
	f.File = cp.file
	cp.seen[f.Kind]++
	cp.sev[f.Kind] = f.Severity
	if cp.seen[f.Kind] <= cp.max {
		cp.em.emit(f)
	}
}

func (cp *capper) close() {
	for k, n := range cp.seen {
		if n > cp.max {
			more := n - cp.max
			cp.em.mu.Lock()
			cp.em.count(k, cp.sev[k], more-1)
			cp.em.mu.Unlock()
			f := newFinding(k, cp.sev[k], "%d more %s findings in this file are not listed", more, k)
			f.File = cp.file
			cp.em.emit(f)
		}
	}
}

func (c *checker) checkDataFile(df snapshotfmt.DataFile, st *scanStats) (res fileResult) {
	if c.ctx.Err() != nil {
		return res
	}
	fh := c.openChecked(df.Path, df.Size, df.Checksum, -1, st)
	if fh == nil {
		return res
	}
	if !c.deep {
		fh.Close()
		return fileResult{sound: true}
	}
	cp := &capper{em: c.em, file: df.Path, max: c.opts.MaxPerKind, seen: map[Kind]int{}, sev: map[Kind]Severity{}}
	defer cp.close()
	r, err := reader.OpenTable(c.ctx, fh, df.Size)
	if err != nil {
		if isReadFailure(err) {
			c.readFailed(df.Path, err)
			cp.emit(newFinding(FileUnreadable, SevError, "opening the table: %v", err))
			return res
		}
		cp.emit(newFinding(TableCorrupt, SevError, "its checksum matches the manifest, yet it is not a readable table: %v", err))
		return res
	}
	defer r.Close()
	return c.scanTable(r, df, st, cp)
}

func (c *checker) scanTable(r *sstable.Reader, df snapshotfmt.DataFile, st *scanStats, cp *capper) (res fileResult) {
	defer func() {
		if p := recover(); p != nil {
			cp.emit(newFinding(TableCorrupt, SevError, "reading the table panicked: %v", p))
			res.sound = false
		}
	}()
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		cp.emit(newFinding(c.tableErrKind(df.Path, err), SevError, "cannot iterate: %v", err))
		return res
	}
	defer it.Close()
	n := c.m.Partitioning.Buckets
	smallest, largest := df.SmallestKey(), df.LargestKey()
	var prev []byte
	var count uint64
	for kv := it.First(); kv != nil; kv = it.Next() {
		if count&4095 == 0 && c.ctx.Err() != nil {
			return res
		}
		count++
		k := kv.K.UserKey
		entry := func(kind Kind, format string, args ...any) Finding {
			f := newFinding(kind, SevError, format, args...)
			if dk, err := snapshotfmt.DecodeKey(k); err == nil {
				f.Bucket = int64(dk.Bucket)
				var s *snapshotfmt.State
				if s = c.states[dk.State]; s == nil {
					f.State = fmt.Sprintf("#%d", dk.State)
				}
				f = f.withKey(s, dk.Key, dk.SubKey, len(dk.SubKey) > 0 || (s != nil && s.Kind == snapshotfmt.KindMap))
			} else {
				f.Key = fmt.Sprintf("%x", k)
			}
			return f
		}
		if kv.K.Kind() != sstable.InternalKeyKindSet {
			cp.emit(entry(EntryKind, "a %s record: only sets belong in a snapshot", kv.K.Kind()))
		}
		if prev != nil && bytes.Compare(k, prev) <= 0 {
			cp.emit(entry(KeyOrder, "not above the previous key %x: the table is not sorted and unique", prev))
		}
		prev = append(prev[:0], k...)
		v, _, err := kv.Value(nil)
		if err != nil {
			cp.emit(entry(c.tableErrKind(df.Path, err), "value cannot be read: %v", err))
			return res
		}
		dk, err := snapshotfmt.DecodeKey(k)
		if err != nil {
			cp.emit(entry(KeyDecode, "%v", err))
			continue
		}
		if dk.Bucket >= n {
			cp.emit(entry(OutsideFileRange, "bucket %d is outside [0, %d)", dk.Bucket, n))
			continue
		}
		s := c.states[dk.State]
		if s == nil {
			cp.emit(entry(UnknownState, "state id %d is not in the states table", dk.State))
		} else if s.Kind != snapshotfmt.KindMap && len(dk.SubKey) > 0 {
			cp.emit(entry(KeyDecode, "%d bytes after the key of a %s state, which has no sub-key", len(dk.SubKey), s.Kind))
		}
		if s != nil && s.Kind == snapshotfmt.KindList {
			if err := checkListValue(v); err != nil {
				cp.emit(entry(ListEncoding, "%v", err))
			}
		}
		if hb := c.m.Partitioning.Bucket(dk.Key); hb != dk.Bucket {
			cp.emit(entry(WrongBucket, "stored in bucket %d, but the key hashes to bucket %d under %s: a start would never find it", dk.Bucket, hb, c.m.Partitioning))
		}
		if dk.Bucket < df.BucketLo || dk.Bucket > df.BucketHi || bytes.Compare(k, smallest) < 0 || bytes.Compare(k, largest) > 0 {
			cp.emit(entry(OutsideFileRange, "outside the file's declared range (buckets %d..%d, keys %s..%s)", df.BucketLo, df.BucketHi, df.Smallest, df.Largest))
			if len(res.outside) < 100 {
				res.outside = append(res.outside, bytes.Clone(k))
			}
		}
		st.bucketEntries[dk.Bucket]++
		st.bucketBytes[dk.Bucket] += uint64(len(k) + len(v))
		st.stateEntries[dk.State]++
		st.entries++
	}
	if err := it.Error(); err != nil {
		cp.emit(newFinding(c.tableErrKind(df.Path, err), SevError, "after %d entries: %v", count, err))
		return res
	}
	if count != df.Entries {
		cp.emit(newFinding(FileEntries, SevError, "holds %d entries, the manifest says %d", count, df.Entries))
	}
	res.sound = true
	return res
}

// checkListValue checks a list state's value is the item encoding of
// FORMAT.md section 5 (a length past the end or 1..3 trailing bytes is
// corrupt), without allocating per item as DecodeWorkerItems does.
func checkListValue(v []byte) error {
	var items int
	for off := 0; off < len(v); items++ {
		if len(v)-off < 4 {
			return fmt.Errorf("list value of %d bytes: item %d at offset %d: %d trailing bytes, need a 4-byte length", len(v), items, off, len(v)-off)
		}
		n := uint64(binary.BigEndian.Uint32(v[off:]))
		off += 4
		if n > uint64(len(v)-off) {
			return fmt.Errorf("list value of %d bytes: item %d at offset %d claims %d bytes, %d remain", len(v), items, off-4, n, len(v)-off)
		}
		off += int(n)
	}
	return nil
}

// duplicates looks up every entry found outside its file's range in the
// file whose range holds it: the same encoded key in two files is a
// duplicate entry the loader would apply twice (or drop).
func (c *checker) duplicates(results []fileResult) {
	files := c.m.Files
	ro, err := reader.Open(c.snap.Dir(), reader.Options{SkipChecksums: true})
	if err != nil {
		return // the manifest changed under us; its findings were reported
	}
	for i, r := range results {
		for _, k := range r.outside {
			j := sort.Search(len(files), func(j int) bool { return bytes.Compare(files[j].LargestKey(), k) >= 0 })
			if j == len(files) || j == i || !results[j].sound || bytes.Compare(files[j].SmallestKey(), k) > 0 {
				continue
			}
			if found, _ := lookup(c.ctx, ro, files[j], k); found {
				f := newFinding(DuplicateKey, SevError, "stored in %s and again in %s", files[j].Path, files[i].Path)
				if dk, err := snapshotfmt.DecodeKey(k); err == nil {
					s := c.states[dk.State]
					f.Bucket = int64(dk.Bucket)
					f = f.withKey(s, dk.Key, dk.SubKey, s != nil && s.Kind == snapshotfmt.KindMap)
				}
				f.File = files[i].Path
				c.em.emit(f)
			}
		}
	}
}

func lookup(ctx context.Context, s *reader.Snapshot, df snapshotfmt.DataFile, k []byte) (bool, error) {
	fi, err := s.OpenFile(ctx, df, k, append(bytes.Clone(k), 0))
	if err != nil {
		return false, err
	}
	defer fi.Close()
	return fi.Next() && bytes.Equal(fi.Key(), k), fi.Err()
}

// compareStats checks per-bucket and per-state tallies against the
// manifest, for the buckets whose files were all read to the end.
func (c *checker) compareStats(results []fileResult, stats []*scanStats, sum *Summary) {
	m := c.m
	n := int(m.Partitioning.Buckets)
	unread := make([]bool, n)
	allSound := true
	for i, r := range results {
		if !r.sound {
			allSound = false
			for b := m.Files[i].BucketLo; b <= m.Files[i].BucketHi; b++ {
				unread[b] = true
			}
		}
	}
	skipped := 0
	cp := &capper{em: c.em, file: "", max: 20, seen: map[Kind]int{}, sev: map[Kind]Severity{}}
	for b := 0; b < n; b++ {
		if unread[b] {
			skipped++
			continue
		}
		var e, by uint64
		for _, st := range stats {
			e += st.bucketEntries[b]
			by += st.bucketBytes[b]
		}
		if e != m.BucketEntries[b] || by != m.BucketBytes[b] {
			f := newFinding(BucketStats, SevError, "holds %d entries and %d bytes, the manifest says %d entries and %d bytes", e, by, m.BucketEntries[b], m.BucketBytes[b])
			f.Bucket = int64(b)
			cp.emit(f)
		}
	}
	cp.close()
	if skipped > 0 {
		sum.NotCompared = append(sum.NotCompared, fmt.Sprintf("entry counts of %d buckets whose files could not be read", skipped))
	}
	if !allSound {
		sum.NotCompared = append(sum.NotCompared, "per-state entry counts")
		return
	}
	for _, s := range m.States {
		var e uint64
		for _, st := range stats {
			e += st.stateEntries[s.ID]
		}
		if e != s.Entries {
			f := newFinding(StateStats, SevError, "holds %d entries, the manifest says %d", e, s.Entries)
			f.State = s.QualifiedName()
			c.em.emit(f)
		}
	}
}
