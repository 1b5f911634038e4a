package reader

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Policy is what a start does at a width above the bucket count.
type Policy string

const (
	// PolicyReject refuses a width above the bucket count (the default).
	PolicyReject Policy = "reject"
	// PolicyCap starts only as many workers as there are buckets.
	PolicyCap Policy = "cap"
	// PolicyIdle starts every worker asked for; the surplus own nothing.
	PolicyIdle Policy = "idle"
)

// ParsePolicy accepts reject, cap or idle ("" is reject).
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "":
		return PolicyReject, nil
	case PolicyReject, PolicyCap, PolicyIdle:
		return Policy(s), nil
	}
	return "", fmt.Errorf("%w: over-width policy %q: want reject, cap or idle", snapshotfmt.ErrInvalidArgument, s)
}

// Assignment is how the buckets of a snapshot are dealt to the workers of a
// start, after the over-width policy is applied.
type Assignment struct {
	Buckets   int    `json:"buckets"`
	Requested int    `json:"requested_width"`
	Width     int    `json:"width"` // workers started: min(Requested, Buckets) under cap
	Policy    Policy `json:"policy"`
	Idle      []int  `json:"idle_workers"`
}

// Assign resolves a start at width w over n buckets under policy p. Under
// reject a width above n is refused (snapshotfmt.ErrRefused, naming the
// ceiling and the command that raises it).
func Assign(n, w int, p Policy) (Assignment, error) {
	if p == "" {
		p = PolicyReject
	}
	if _, err := ParsePolicy(string(p)); err != nil {
		return Assignment{}, err
	}
	if w < 1 {
		return Assignment{}, fmt.Errorf("%w: width %d: want at least 1", snapshotfmt.ErrInvalidArgument, w)
	}
	if n < snapshotfmt.MinBuckets || n > snapshotfmt.MaxBuckets {
		return Assignment{}, fmt.Errorf("%w: bucket count %d", snapshotfmt.ErrInvalidArgument, n)
	}
	a := Assignment{Buckets: n, Requested: w, Width: w, Policy: p, Idle: []int{}}
	if w > n {
		switch p {
		case PolicyReject:
			return Assignment{}, snapshotfmt.CheckWidth(w, n)
		case PolicyCap:
			a.Width = n
		case PolicyIdle:
			a.Idle = snapshotfmt.IdleWorkers(w, n)
		}
	}
	return a, nil
}

// Range is the bucket range worker i owns; ok is false for an idle worker.
func (a Assignment) Range(i int) (lo, hi uint32, ok bool) {
	l, h, ok := snapshotfmt.WorkerRange(i, a.Width, a.Buckets)
	return uint32(l), uint32(h), ok
}

// Loader is what an engine's restore path needs from a snapshot to start
// one worker at a width: the buckets it owns, its data files (whole or
// clipped), its entries, and its per-worker state after redistribution.
type Loader struct {
	s *Snapshot
	a Assignment
	// trusted reads the same snapshot without re-hashing files that
	// verified records as checked: at a width that cuts a file between
	// several workers, each would otherwise hash the whole file again.
	trusted  *Snapshot
	verified sync.Map // data file path -> struct{}
	tables   sync.Map // data file path -> *tableCheck (validateTable)
}

// NewLoader resolves a start at width w under policy p.
func (s *Snapshot) NewLoader(w int, p Policy) (*Loader, error) {
	a, err := Assign(int(s.m.Partitioning.Buckets), w, p)
	if err != nil {
		return nil, err
	}
	t := *s
	t.opts.SkipChecksums = true
	return &Loader{s: s, a: a, trusted: &t}, nil
}

// openChecked opens a data file for iteration, checking its whole-file
// checksum once per Loader.
func (l *Loader) openChecked(ctx context.Context, df snapshotfmt.DataFile, lower, upper []byte) (*FileIter, error) {
	if _, ok := l.verified.Load(df.Path); !ok && !l.s.opts.SkipChecksums {
		f, err := l.s.OpenListed(df.Path, df.Size, df.Checksum)
		if err != nil {
			return nil, err
		}
		f.Close()
		l.verified.Store(df.Path, struct{}{})
	}
	return l.trusted.OpenFile(ctx, df, lower, upper)
}

// Snapshot is the snapshot being loaded.
func (l *Loader) Snapshot() *Snapshot { return l.s }

// Assignment is the resolved width and the idle workers.
func (l *Loader) Assignment() Assignment { return l.a }

// Width is the number of workers to start.
func (l *Loader) Width() int { return l.a.Width }

// WorkerPart is what worker i owns.
type WorkerPart struct {
	Worker   int  `json:"worker"`
	Owns     bool `json:"owns_state"`
	BucketLo int  `json:"bucket_lo"` // -1 for an idle worker
	BucketHi int  `json:"bucket_hi"`
	// Files are the data files holding the worker's buckets, each marked
	// whole (it lies inside the range: ingest it as it is) or not (it
	// straddles the range: only the part inside belongs to this worker).
	Files []FilePart `json:"files"`
}

// FilePart is one data file as seen by one worker.
type FilePart struct {
	File  snapshotfmt.DataFile `json:"file"`
	Whole bool                 `json:"whole"`
}

func (l *Loader) checkWorker(i int) error {
	if i < 0 || i >= l.a.Width {
		return fmt.Errorf("%w: worker %d: the start has workers 0..%d", snapshotfmt.ErrInvalidArgument, i, l.a.Width-1)
	}
	return nil
}

// Worker returns what worker i owns.
func (l *Loader) Worker(i int) (WorkerPart, error) {
	if err := l.checkWorker(i); err != nil {
		return WorkerPart{}, err
	}
	lo, hi, ok := l.a.Range(i)
	p := WorkerPart{Worker: i, Owns: ok, BucketLo: -1, BucketHi: -1, Files: []FilePart{}}
	if !ok {
		return p, nil
	}
	p.BucketLo, p.BucketHi = int(lo), int(hi)
	for _, df := range l.s.FilesIn(lo, hi) {
		p.Files = append(p.Files, FilePart{File: df, Whole: df.BucketLo >= lo && df.BucketHi <= hi})
	}
	return p, nil
}

// Entries iterates worker i's entries in key order (nothing for an idle
// worker).
func (l *Loader) Entries(ctx context.Context, i int) (*Iter, error) {
	if err := l.checkWorker(i); err != nil {
		return nil, err
	}
	lo, hi, ok := l.a.Range(i)
	if !ok {
		return &Iter{ctx: ctx, s: l.s}, nil
	}
	return l.s.NewIter(ctx, lo, hi), nil
}

// WorkerStateItems is one per-worker state of one worker after
// redistribution.
type WorkerStateItems struct {
	Step  string           `json:"step"`
	Name  string           `json:"name"`
	Rule  snapshotfmt.Rule `json:"rule"`
	Items [][]byte         `json:"items"`
}

// QualifiedName is STEP/NAME.
func (w WorkerStateItems) QualifiedName() string { return w.Step + "/" + w.Name }

// WorkerStates redistributes every per-worker state to all workers of the
// start at once (each file is read once): result[state][worker].
//
//   - split: items concatenated in order of old worker, then item; item j
//     goes to new worker j mod W;
//   - union: every worker gets all items;
//   - broadcast: every worker gets the one copy, old worker 0's file.
func (l *Loader) WorkerStates() ([][]WorkerStateItems, error) {
	out := make([][]WorkerStateItems, 0, len(l.s.m.WorkerStates))
	for _, ws := range l.s.m.WorkerStates {
		per, err := l.redistribute(ws)
		if err != nil {
			return nil, err
		}
		out = append(out, per)
	}
	return out, nil
}

// WorkerState returns worker i's per-worker states after redistribution.
func (l *Loader) WorkerState(i int) ([]WorkerStateItems, error) {
	if err := l.checkWorker(i); err != nil {
		return nil, err
	}
	all, err := l.WorkerStates()
	if err != nil {
		return nil, err
	}
	out := make([]WorkerStateItems, len(all))
	for s := range all {
		out[s] = all[s][i]
	}
	return out, nil
}

func (l *Loader) redistribute(ws snapshotfmt.WorkerState) ([]WorkerStateItems, error) {
	switch ws.Rule {
	case snapshotfmt.RuleSplit, snapshotfmt.RuleUnion, snapshotfmt.RuleBroadcast:
	default:
		return nil, fmt.Errorf("%w: per-worker state %s: unknown rule %q", snapshotfmt.ErrUnsupported, ws.QualifiedName(), ws.Rule)
	}
	// Files are listed per old worker; order by worker so "in order of old
	// worker" holds whatever the listing order.
	files := make([]snapshotfmt.WorkerFile, len(ws.Files))
	copy(files, ws.Files)
	sortWorkerFiles(files)
	if ws.Rule == snapshotfmt.RuleBroadcast && (len(files) == 0 || files[0].Worker != 0) {
		return nil, fmt.Errorf("%w: broadcast state %s has no file of worker 0", snapshotfmt.ErrCorrupt, ws.QualifiedName())
	}
	old := make([][][]byte, len(files))
	for i, wf := range files {
		items, err := l.s.ReadWorkerFile(wf)
		if err != nil {
			return nil, fmt.Errorf("per-worker state %s: %w", ws.QualifiedName(), err)
		}
		old[i] = items
	}
	per := make([]WorkerStateItems, l.a.Width)
	for i, items := range snapshotfmt.Redistribute(ws.Rule, old, l.a.Width) {
		if items == nil {
			items = [][]byte{}
		}
		per[i] = WorkerStateItems{Step: ws.Step, Name: ws.Name, Rule: ws.Rule, Items: items}
	}
	return per, nil
}

func sortWorkerFiles(files []snapshotfmt.WorkerFile) {
	sort.SliceStable(files, func(a, b int) bool { return files[a].Worker < files[b].Worker })
}
