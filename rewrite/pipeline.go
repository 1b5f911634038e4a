package rewrite

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/internal/extsort"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

type run struct {
	opts    Options
	src     *source
	w       *writer.Snapshot
	to      snapshotfmt.Partitioning
	plan    plan.RewritePlan
	tmpRoot string

	spilledBytes atomic.Int64
	spilledRuns  atomic.Int64

	// states is the target's states table; fp the merged fingerprints of
	// what was routed (nil under Options.NoVerify).
	states []snapshotfmt.State
	fpMu   sync.Mutex
	fp     *verify.Fingerprinter
}

// fingerprinter returns a Fingerprinter for one goroutine, or nil.
func (r *run) fingerprinter() *verify.Fingerprinter {
	if r.opts.NoVerify {
		return nil
	}
	return verify.NewFingerprinter(r.to, r.states)
}

// addFingerprints merges one goroutine's fingerprints.
func (r *run) addFingerprints(f *verify.Fingerprinter) {
	if f == nil {
		return
	}
	r.fpMu.Lock()
	defer r.fpMu.Unlock()
	if r.fp == nil {
		r.fp = f
		return
	}
	r.fp.Merge(f)
}

func (r *run) work(ctx context.Context) error {
	switch r.plan.Strategy {
	case plan.StrategySplit, plan.StrategyMerge:
		return r.runTasks(ctx, r.streamTasks())
	default:
		return r.shuffle(ctx)
	}
}

// task is one unit of split or merge work: the old buckets it reads (each
// a stream; several are merged) and the new buckets it owns, the set
// {first + i*step : i < count}. Entries of other new buckets are skipped:
// another task (a later pass, or a neighbour sharing a boundary bucket)
// owns them.
type task struct {
	old                []uint32
	first, step, count uint32
}

func (t *task) slot(j uint32) int {
	if j < t.first {
		return -1
	}
	d := j - t.first
	if t.step == 0 {
		if d == 0 {
			return 0
		}
		return -1
	}
	if d%t.step != 0 || d/t.step >= t.count {
		return -1
	}
	return int(d / t.step)
}

func (r *run) streamTasks() []task {
	n, m := r.src.part.Buckets, r.to.Buckets
	var tasks []task
	switch {
	case r.plan.Strategy == plan.StrategySplit:
		k := m / n
		f := uint32(max(r.plan.WritersPerTask, 1))
		for b := range n {
			for lo := uint32(0); lo < k; lo += f {
				t := task{old: []uint32{b}, count: min(f, k-lo)}
				if r.to.Mapping == snapshotfmt.MappingMod {
					// new mod N = old: b, b+N, b+2N, ...
					t.first, t.step = b+lo*n, n
				} else {
					// new div k = old: b*k .. b*k+k-1
					t.first, t.step = b*k+lo, 1
				}
				tasks = append(tasks, t)
			}
		}
	case r.to.Mapping == snapshotfmt.MappingMod:
		// N = kM: new bucket j folds j, j+M, j+2M, ...
		for j := range m {
			t := task{first: j, step: 0, count: 1}
			for b := j; b < n; b += m {
				t.old = append(t.old, b)
			}
			tasks = append(tasks, t)
		}
	default:
		// range: a chunk of new buckets draws from the old buckets whose
		// hash ranges overlap it.
		c := uint32(max(r.plan.WritersPerTask, 1))
		for j0 := uint32(0); j0 < m; j0 += c {
			j1 := min(j0+c, m) - 1
			lo := r.src.part.BucketOfHash(lowHash(j0, m))
			hi := r.src.part.BucketOfHash(lowHash(j1+1, m) - 1)
			if j1+1 == m {
				hi = n - 1
			}
			t := task{first: j0, step: 1, count: j1 - j0 + 1}
			for b := lo; b <= hi; b++ {
				t.old = append(t.old, b)
			}
			tasks = append(tasks, t)
		}
	}
	return tasks
}

// lowHash is the smallest hash that the range mapping puts in bucket j of
// m: ceil(j * 2^64 / m).
func lowHash(j, m uint32) uint64 {
	if j >= m {
		return math.MaxUint64 // callers subtract one only for j < m
	}
	q, rem := bits.Div64(uint64(j), 0, uint64(m))
	if rem != 0 {
		q++
	}
	return q
}

// runTasks runs tasks on Parallelism goroutines, taking them in order.
func (r *run) runTasks(ctx context.Context, tasks []task) error {
	g, ctx := errgroup.WithContext(ctx)
	var next atomic.Int64
	for range min(r.opts.Parallelism, len(tasks)) {
		g.Go(func() error {
			fp := r.fingerprinter()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) {
					r.addFingerprints(fp)
					return nil
				}
				if err := r.runTask(ctx, &tasks[i], fp); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

func (r *run) runTask(ctx context.Context, t *task, fp *verify.Fingerprinter) error {
	var in entrySource
	if len(t.old) == 1 {
		in = r.src.newStream(ctx, r.src.spansOf(t.old[0], t.old[0]))
	} else {
		streams := make([]*stream, len(t.old))
		for i, b := range t.old {
			streams[i] = r.src.newStream(ctx, r.src.spansOf(b, b))
		}
		in = newMerger(streams)
	}
	defer in.Close()
	writers := make([]*writer.BucketWriter, t.count)
	fail := func(err error) error {
		for _, bw := range writers {
			if bw != nil {
				bw.Abort()
			}
		}
		return err
	}
	var buf []byte
	for in.Next() {
		k, v, h := in.current()
		j := r.to.BucketOfHash(h)
		i := t.slot(j)
		if i < 0 {
			in.uncount()
			continue
		}
		bw := writers[i]
		if bw == nil {
			bw = r.w.NewBucketWriter()
			writers[i] = bw
		}
		buf = append(buf[:0], k...)
		snapshotfmt.WithBucket(buf, j)
		if err := bw.Add(buf, v); err != nil {
			return fail(err)
		}
		if fp != nil {
			if _, _, err := fp.Add(k, v); err != nil {
				return fail(err)
			}
		}
	}
	if err := in.Err(); err != nil {
		return fail(err)
	}
	for i, bw := range writers {
		if bw != nil {
			writers[i] = nil
			if err := bw.Close(); err != nil {
				return fail(err)
			}
		}
	}
	return nil
}

// batch carries entries from a scanner to one owner: data holds keys
// (already rewritten to the new bucket) and values back to back, ends the
// end offset of each key and value.
type batch struct {
	data []byte
	ends []uint32
}

func (b *batch) add(key []byte, bucket uint32, val []byte) {
	start := len(b.data)
	b.data = append(b.data, key...)
	snapshotfmt.WithBucket(b.data[start:], bucket)
	b.ends = append(b.ends, uint32(len(b.data)))
	b.data = append(b.data, val...)
	b.ends = append(b.ends, uint32(len(b.data)))
}

// shuffle runs the shuffle group by group: under mod to mod, old bucket b
// feeds only new buckets j = b mod g, so each group is a shuffle of its
// own with a fraction of the data.
func (r *run) shuffle(ctx context.Context) error {
	// Named after this process, so the next run removes it if we are
	// killed before the deferred removal (and removes those of dead runs).
	extsort.RemoveStale(nil, r.tmpRoot)
	spill, err := extsort.MkdirSpill(nil, r.tmpRoot)
	if err != nil {
		return fmt.Errorf("in %s: %w", r.tmpRoot, err)
	}
	defer spill.Remove()
	g := uint32(max(r.plan.Groups, 1))
	for gi := range g {
		if err := r.shuffleGroup(ctx, spill.Path, gi, g); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) shuffleGroup(ctx context.Context, spillDir string, gi, g uint32) error {
	n, m := r.src.part.Buckets, r.to.Buckets
	var spans []span
	if g == 1 {
		for _, df := range r.src.m.Files {
			spans = append(spans, span{df: df, whole: true})
		}
	} else {
		for b := gi; b < n; b += g {
			spans = append(spans, r.src.spansOf(b, b)...)
		}
	}
	targets := int((m - gi + g - 1) / g) // new buckets gi, gi+g, ...
	// Two labelled phases per group: the scan (read and sort), then the
	// owners' merge and write, each with its total for the bar's ETA.
	label, groupBytes := "shuffle", r.groupBytes(gi, g)
	if g > 1 {
		label = fmt.Sprintf("shuffle group %d/%d", gi+1, g)
	}
	progress.StartUnit(r.src.prog, groupBytes, label+": read and sort", progress.Bytes)
	owners := max(1, min(r.opts.Parallelism, targets))
	sorterMem := r.plan.SorterMemory / int64(owners)

	eg, ctx := errgroup.WithContext(ctx)
	chans := make([]chan *batch, owners)
	for o := range chans {
		chans[o] = make(chan *batch, 4)
	}
	free := sync.Pool{New: func() any { return &batch{data: make([]byte, 0, plan.BatchBytes+4096)} }}

	// Scanners: one span at a time each, Parallelism of them.
	var next atomic.Int64
	var scanners sync.WaitGroup
	send := func(o int, b *batch) error {
		select {
		case chans[o] <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	scan := func() error {
		defer scanners.Done()
		fp := r.fingerprinter()
		pending := make([]*batch, owners)
		for {
			i := int(next.Add(1) - 1)
			if i >= len(spans) {
				break
			}
			st := r.src.newStream(ctx, spans[i:i+1])
			for st.Next() {
				j := r.to.BucketOfHash(st.hash)
				o := snapshotfmt.OwnerOf(int(j/g), owners, targets)
				b := pending[o]
				if b == nil {
					b = free.Get().(*batch)
					pending[o] = b
				}
				b.add(st.key, j, st.val)
				if fp != nil {
					if _, _, err := fp.Add(st.key, st.val); err != nil {
						st.Close()
						return err
					}
				}
				if len(b.data) >= plan.BatchBytes {
					pending[o] = nil
					if err := send(o, b); err != nil {
						st.Close()
						return err
					}
				}
			}
			st.Close()
			if err := st.Err(); err != nil {
				return err
			}
		}
		for o, b := range pending {
			if b != nil {
				if err := send(o, b); err != nil {
					return err
				}
			}
		}
		r.addFingerprints(fp)
		return nil
	}
	for range min(r.opts.Parallelism, max(len(spans), 1)) {
		scanners.Add(1)
		eg.Go(scan)
	}
	go func() {
		scanners.Wait()
		progress.StartUnit(r.src.prog, groupBytes, label+": merge and write", progress.Bytes)
		for _, c := range chans {
			close(c)
		}
	}()
	for o := range owners {
		eg.Go(func() error {
			return r.own(ctx, chans[o], &free, sorterMem, spillDir, g)
		})
	}
	return eg.Wait()
}

// groupBytes is the logical bytes of the old buckets feeding group gi of
// g (0, unknown, when the manifest has no per-bucket sizes).
func (r *run) groupBytes(gi, g uint32) int64 {
	bb := r.src.m.BucketBytes
	if g <= 1 {
		return int64(r.src.m.TotalBytes())
	}
	var sum uint64
	for b := int(gi); b < len(bb); b += int(g) {
		sum += bb[b]
	}
	return int64(sum)
}

// own is one owner: it sorts everything routed to it, then writes it.
func (r *run) own(ctx context.Context, in <-chan *batch, free *sync.Pool, mem int64, spillDir string, g uint32) (err error) {
	s := extsort.New(extsort.Options{Memory: mem, TmpDir: spillDir})
	defer func() {
		st := s.Stats()
		r.spilledBytes.Add(st.SpillBytes)
		r.spilledRuns.Add(int64(st.Runs))
		if cerr := s.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("remove spill files: %w", cerr)
		}
	}()
	for b := range in {
		if err == nil {
			start := uint32(0)
			for i := 0; i < len(b.ends); i += 2 {
				k, e := b.data[start:b.ends[i]], b.ends[i+1]
				v := b.data[b.ends[i]:e]
				start = e
				if err = s.Add(k, v); err != nil {
					err = fmt.Errorf("sort: %w", err)
					break
				}
			}
		}
		b.data, b.ends = b.data[:0], b.ends[:0]
		free.Put(b)
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	it, err := s.Finish(ctx)
	if err != nil {
		return fmt.Errorf("sort: %w", err)
	}
	defer it.Close()
	// With g = 1 the owner's buckets are contiguous and one writer takes
	// them all; with g > 1 they interleave with other owners' and groups',
	// so each bucket gets its own writer (files never overlap).
	var bw *writer.BucketWriter
	cur := int64(-1)
	var unreported int64
	defer func() { r.src.prog.Add(unreported) }()
	for it.Next() {
		k := it.Key()
		if unreported += int64(len(k) + len(it.Value())); unreported >= 1<<20 {
			r.src.prog.Add(unreported)
			unreported = 0
		}
		if g > 1 {
			j, _ := snapshotfmt.KeyBucket(k)
			if int64(j) != cur && bw != nil {
				if err := bw.Close(); err != nil {
					return err
				}
				bw = nil
			}
			cur = int64(j)
		}
		if bw == nil {
			bw = r.w.NewBucketWriter()
		}
		if err := bw.Add(k, it.Value()); err != nil {
			bw.Abort()
			return err
		}
	}
	if err := it.Err(); err != nil {
		if bw != nil {
			bw.Abort()
		}
		return fmt.Errorf("sort: %w", err)
	}
	if bw != nil {
		return bw.Close()
	}
	return nil
}
