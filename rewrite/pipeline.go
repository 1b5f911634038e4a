package rewrite

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
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
	// col writes split, merge and grouped-shuffle output in bucket order.
	col *collector
	// cutWidths are the widths the files are cut for.
	cutWidths []int

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
	getSpill, removeSpill := lazySpill(r.tmpRoot)
	defer removeSpill()
	switch r.plan.Strategy {
	case plan.StrategySplit, plan.StrategyMerge:
		tasks := r.streamTasks()
		bounds, order := r.ownersFor(tasks)
		r.col = newCollector(r.w, bounds, r.collectorBudget(len(bounds)-1), getSpill)
		err := r.runTasks(ctx, tasks, order)
		return r.finishCollector(err)
	default:
		if r.plan.Groups > 1 {
			// Owners of contiguous new buckets across the groups; groups
			// run one after another, so a group's buckets wait (in memory,
			// then spilled) for the buckets between them.
			owners := max(1, min(r.opts.Parallelism, int(r.to.Buckets)))
			bounds := make([]uint32, owners+1)
			for o := range owners + 1 {
				bounds[o] = uint32(int(r.to.Buckets) * o / owners)
			}
			r.col = newCollector(r.w, bounds, r.plan.SorterMemory/2, getSpill)
		}
		err := r.shuffle(ctx, getSpill)
		if r.col != nil {
			err = r.finishCollector(err)
		}
		return err
	}
}

func (r *run) finishCollector(err error) error {
	if err != nil {
		r.col.abort()
	} else {
		err = r.col.finish()
	}
	r.spilledBytes.Add(r.col.spilledBytes.Load())
	r.spilledRuns.Add(r.col.spilledRuns.Load())
	return err
}

// collectorBudget is what runs waiting for their turn may hold in memory:
// the budget less the owners' writers and the tasks' open readers.
func (r *run) collectorBudget(owners int) int64 {
	b := r.opts.Memory - int64(owners)*plan.WriterMemory - int64(r.opts.Parallelism)*int64(max(r.plan.FanIn, 1))*plan.ReaderMemory
	return max(b, minCollectorBudget)
}

// minCollectorBudget is the least the collector may hold (a variable for
// the tests, which make every run spill).
var minCollectorBudget int64 = 4 << 20

// ownersFor chooses the owners' contiguous ranges of new buckets and the
// order tasks run in. Tasks that write contiguous buckets are spread over
// about Parallelism owners and taken round-robin from them, so that
// concurrent tasks mostly write to different owners. A mod split task
// feeds every round of N new buckets; owners then hold whole rounds, as
// many rounds each as the runs waiting for their turn can hold in memory
// (round i of owner o waits for nothing when o holds only round i).
func (r *run) ownersFor(tasks []task) (bounds []uint32, order []int) {
	n, m := r.src.part.Buckets, r.to.Buckets
	p := max(1, r.opts.Parallelism)
	order = make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	if r.plan.Strategy == plan.StrategySplit && r.to.Mapping == snapshotfmt.MappingMod && m > n {
		// Up to about as many owners as the widest default cut makes
		// ranges anyway (or Parallelism), each holding whole rounds; fewer
		// rounds per owner when what waits would pass half the budget, as
		// far as the writers' memory allows.
		k := m / n
		widest := 1
		for _, w := range r.cutWidths {
			widest = max(widest, min(w, plan.MaxDefaultCutWidth))
		}
		target := uint32(max(p, widest))
		perOwner := (k + target - 1) / target
		d := int64(r.src.m.TotalBytes()) + 8*int64(r.src.m.TotalEntries())
		if perOwner > 1 && d-d/int64(perOwner) > r.collectorBudget(int(target))/2 {
			maxOwners := uint32(max(int64(p), r.opts.Memory/4/plan.WriterMemory))
			perOwner = max(1, (k+maxOwners-1)/maxOwners)
		}
		for j := uint32(0); j < m; j += perOwner * n {
			bounds = append(bounds, j)
		}
		return r.snapBounds(append(bounds, m)), order
	}
	owners := max(1, min(p, int(m)))
	for o := range owners {
		bounds = append(bounds, uint32(int(m)*o/owners))
	}
	bounds = r.snapBounds(append(bounds, m))
	owners = len(bounds) - 1
	// Round-robin over owners, each owner's tasks in bucket order.
	per := make([][]int, owners)
	for i, t := range tasks {
		o := sortSearch(bounds, t.first)
		per[o] = append(per[o], i)
	}
	order = order[:0]
	for more := true; more; {
		more = false
		for o := range per {
			if len(per[o]) > 0 {
				order = append(order, per[o][0])
				per[o] = per[o][1:]
				more = true
			}
		}
	}
	return bounds, order
}

// snapBounds moves the owners' inner boundaries to the nearest bucket at
// which a worker of a cut width begins: a file ends at both, so where they
// differ each adds a file.
func (r *run) snapBounds(bounds []uint32) []uint32 {
	m := int(r.to.Buckets)
	var cuts []uint32
	for _, w := range r.cutWidths {
		for b := 1; b < m; b++ {
			if snapshotfmt.OwnerOf(b, w, m) != snapshotfmt.OwnerOf(b-1, w, m) {
				cuts = append(cuts, uint32(b))
			}
		}
	}
	if len(cuts) == 0 {
		return bounds
	}
	slices.Sort(cuts)
	out := []uint32{bounds[0]}
	for _, j := range bounds[1 : len(bounds)-1] {
		i, _ := slices.BinarySearch(cuts, j)
		best := j
		if i < len(cuts) {
			best = cuts[i]
		}
		if i > 0 && (i == len(cuts) || j-cuts[i-1] < cuts[i]-j) {
			best = cuts[i-1]
		}
		if best > out[len(out)-1] && best < bounds[len(bounds)-1] {
			out = append(out, best)
		}
	}
	return append(out, bounds[len(bounds)-1])
}

// sortSearch returns the owner whose range holds j.
func sortSearch(bounds []uint32, j uint32) int {
	o := 0
	for o+2 < len(bounds) && bounds[o+1] <= j {
		o++
	}
	return o
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
		// One pass: a task's buckets wait in the collector, not in open
		// writers, so it needs no more than one read of its old bucket.
		f := k
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
func (r *run) runTasks(ctx context.Context, tasks []task, order []int) error {
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
				if err := r.runTask(ctx, &tasks[order[i]], fp); err != nil {
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
	buckets := make([]uint32, t.count)
	for i := range buckets {
		buckets[i] = t.first + uint32(i)*t.step
	}
	o := r.col.newOut(buckets)
	fail := func(err error) error {
		o.abort(err)
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
		buf = append(buf[:0], k...)
		snapshotfmt.WithBucket(buf, j)
		if err := o.add(i, buf, v); err != nil {
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
	return o.close()
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
func (r *run) shuffle(ctx context.Context, getSpill func() (string, error)) error {
	// The spill directory is named after this process, so the next run
	// removes it if we are killed before the deferred removal (and
	// removes those of dead runs).
	spill, err := getSpill()
	if err != nil {
		return err
	}
	g := uint32(max(r.plan.Groups, 1))
	for gi := range g {
		if err := r.shuffleGroup(ctx, spill, gi, g); err != nil {
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
	if r.col != nil {
		sorterMem /= 2 // the other half holds runs waiting in the collector
	}

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
			// Owner o's new buckets: gi + t*g for t in [tlo, thi).
			tlo, thi, _ := snapshotfmt.WorkerRange(o, owners, targets)
			var buckets []uint32
			for t := tlo; t <= thi; t++ {
				buckets = append(buckets, gi+uint32(t)*g)
			}
			return r.own(ctx, chans[o], &free, sorterMem, spillDir, g, buckets)
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
func (r *run) own(ctx context.Context, in <-chan *batch, free *sync.Pool, mem int64, spillDir string, g uint32, buckets []uint32) (err error) {
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
	var unreported int64
	defer func() { r.src.prog.Add(unreported) }()
	if g > 1 {
		// Its buckets interleave with other owners' and groups': they go
		// to the collector, which writes them in bucket order.
		out := r.col.newOut(buckets)
		slot := 0
		for it.Next() {
			k := it.Key()
			if unreported += int64(len(k) + len(it.Value())); unreported >= 1<<20 {
				r.src.prog.Add(unreported)
				unreported = 0
			}
			j, _ := snapshotfmt.KeyBucket(k)
			for slot < len(buckets) && buckets[slot] != j {
				slot++
			}
			if slot == len(buckets) {
				err := fmt.Errorf("internal error: bucket %d reached an owner of other buckets", j)
				out.abort(err)
				return err
			}
			if err := out.add(slot, k, it.Value()); err != nil {
				out.abort(err)
				return err
			}
		}
		if err := it.Err(); err != nil {
			out.abort(err)
			return fmt.Errorf("sort: %w", err)
		}
		return out.close()
	}
	// With g = 1 the owner's buckets are contiguous: one writer takes them
	// all, cutting files by size and at the cut widths.
	var bw *writer.BucketWriter
	for it.Next() {
		k := it.Key()
		if unreported += int64(len(k) + len(it.Value())); unreported >= 1<<20 {
			r.src.prog.Add(unreported)
			unreported = 0
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
