package verify

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Fingerprint is the order-independent digest of a multiset of entries:
// their count and the sum (mod 2^128) of their 128-bit entry hashes.
type Fingerprint struct {
	Count uint64 `json:"count"`
	Hi    uint64 `json:"hi"`
	Lo    uint64 `json:"lo"`
}

func (f *Fingerprint) add(h xxh3.Uint128) {
	var c uint64
	f.Lo, c = bits.Add64(f.Lo, h.Lo, 0)
	f.Hi, _ = bits.Add64(f.Hi, h.Hi, c)
	f.Count++
}

func (f *Fingerprint) merge(o Fingerprint) {
	var c uint64
	f.Lo, c = bits.Add64(f.Lo, o.Lo, 0)
	f.Hi, _ = bits.Add64(f.Hi, o.Hi, c)
	f.Count += o.Count
}

// FingerprintSet holds one Fingerprint per bucket of Layout.
type FingerprintSet struct {
	Layout  snapshotfmt.Partitioning
	Buckets []Fingerprint
}

// Differ lists the buckets whose fingerprints differ between two sets of
// one layout.
func (a FingerprintSet) Differ(b FingerprintSet) []uint32 {
	var out []uint32
	for i := range a.Buckets {
		if i >= len(b.Buckets) || a.Buckets[i] != b.Buckets[i] {
			out = append(out, uint32(i))
		}
	}
	return out
}

// stateInfo is the canonical identity prefix of one state id.
type stateInfo struct {
	st     *snapshotfmt.State
	prefix []byte // uvarint len(step), step, uvarint len(name), name
	hasSub bool
}

func stateTable(states []snapshotfmt.State) []*stateInfo {
	t := make([]*stateInfo, 1<<16)
	for i := range states {
		s := &states[i]
		p := binary.AppendUvarint(nil, uint64(len(s.Step)))
		p = append(p, s.Step...)
		p = binary.AppendUvarint(p, uint64(len(s.Name)))
		p = append(p, s.Name...)
		t[s.ID] = &stateInfo{st: s, prefix: p, hasSub: s.Kind == snapshotfmt.KindMap}
	}
	return t
}

// appendIdentity appends the canonical encoding of an entry's identity:
// (step, name, key, sub-key or none). Numeric state ids never enter it,
// since they differ between snapshots.
func appendIdentity(dst []byte, si *stateInfo, key, sub []byte) []byte {
	dst = append(dst, si.prefix...)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	if si.hasSub {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(len(sub)))
		return append(dst, sub...)
	}
	return append(dst, 0)
}

// Fingerprinter accumulates per-bucket fingerprints of entries under a
// layout (the bucket each key hashes to there, whatever bucket the entries
// are stored under). One per goroutine; Merge combines them.
type Fingerprinter struct {
	layout snapshotfmt.Partitioning
	states []*stateInfo
	fp     []Fingerprint
	buf    []byte
}

// NewFingerprinter fingerprints entries of a snapshot with the given states
// table into the buckets of layout.
func NewFingerprinter(layout snapshotfmt.Partitioning, states []snapshotfmt.State) *Fingerprinter {
	return &Fingerprinter{layout: layout, states: stateTable(states), fp: make([]Fingerprint, layout.Buckets)}
}

// Add adds one entry (encoded key and value) and returns the layout bucket
// its key hashes to and its stored bucket.
func (f *Fingerprinter) Add(encKey, value []byte) (bucket, stored uint32, err error) {
	dk, err := snapshotfmt.DecodeKey(encKey)
	if err != nil {
		return 0, 0, err
	}
	si := f.states[dk.State]
	if si == nil {
		return 0, 0, fmt.Errorf("%w: key %x: state id %d is not in the states table", snapshotfmt.ErrCorrupt, encKey, dk.State)
	}
	b := f.layout.Bucket(dk.Key)
	f.buf = appendIdentity(f.buf[:0], si, dk.Key, dk.SubKey)
	f.buf = append(f.buf, value...)
	f.fp[b].add(xxh3.Hash128(f.buf))
	return b, dk.Bucket, nil
}

// Merge adds o's fingerprints into f (same layout).
func (f *Fingerprinter) Merge(o *Fingerprinter) {
	for i := range f.fp {
		f.fp[i].merge(o.fp[i])
	}
}

// Result is the fingerprint set so far.
func (f *Fingerprinter) Result() FingerprintSet {
	return FingerprintSet{Layout: f.layout, Buckets: append([]Fingerprint(nil), f.fp...)}
}

// FingerprintOptions tune Fingerprints.
type FingerprintOptions struct {
	Parallelism int
	Progress    progress.Reporter
	// OnEntry, if set, is called for every entry (from several goroutines)
	// with the layout bucket of its key and the bucket it is stored under.
	OnEntry func(key, value []byte, bucket, stored uint32)
}

// Fingerprints reads every entry of snap (files in parallel, checksums
// checked) and returns its per-bucket fingerprints under layout. A rewrite
// compares the set of its output under its own layout with the set of its
// source under the same layout.
func Fingerprints(ctx context.Context, snap *reader.Snapshot, layout snapshotfmt.Partitioning, opts FingerprintOptions) (FingerprintSet, error) {
	if err := layout.Validate(); err != nil {
		return FingerprintSet{}, fmt.Errorf("%w: %v", snapshotfmt.ErrInvalidArgument, err)
	}
	fps, err := fingerprintFiles(ctx, []side{{snap: snap, layout: layout, onEntry: opts.OnEntry}}, opts.Parallelism, progress.OrNop(opts.Progress))
	if err != nil {
		return FingerprintSet{}, err
	}
	return fps[0], nil
}

// side is one snapshot to fingerprint.
type side struct {
	snap    *reader.Snapshot
	layout  snapshotfmt.Partitioning
	onEntry func(key, value []byte, bucket, stored uint32)
}

// fingerprintFiles reads the files of several snapshots in one pool, so
// two snapshots are read at once, each file once.
func fingerprintFiles(ctx context.Context, sides []side, par int, pr progress.Reporter) ([]FingerprintSet, error) {
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	type job struct{ side, file int }
	var jobs []job
	var total int64
	for si, s := range sides {
		for fi, f := range s.snap.Manifest().Files {
			jobs = append(jobs, job{si, fi})
			total += f.Size
		}
	}
	pr.Start(total, "fingerprint")
	defer pr.Finish()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	accs := make([][]*Fingerprinter, par)
	for w := 0; w < par; w++ {
		accs[w] = make([]*Fingerprinter, len(sides))
		for si, s := range sides {
			accs[w][si] = NewFingerprinter(s.layout, s.snap.Manifest().States)
		}
		wg.Add(1)
		go func(acc []*Fingerprinter) {
			defer wg.Done()
			for j := range ch {
				s := sides[j.side]
				df := s.snap.Manifest().Files[j.file]
				if err := fingerprintFile(ctx, s, df, acc[j.side]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
				pr.Add(df.Size)
			}
		}(accs[w])
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]FingerprintSet, len(sides))
	for si := range sides {
		for w := 1; w < par; w++ {
			accs[0][si].Merge(accs[w][si])
		}
		out[si] = accs[0][si].Result()
	}
	return out, nil
}

func fingerprintFile(ctx context.Context, s side, df snapshotfmt.DataFile, acc *Fingerprinter) error {
	fi, err := s.snap.OpenFile(ctx, df, nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.snap.Dir(), err)
	}
	defer fi.Close()
	n := 0
	for fi.Next() {
		if n++; n&4095 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		b, stored, err := acc.Add(fi.Key(), fi.Value())
		if err != nil {
			return fmt.Errorf("%s: %s: %w", s.snap.Dir(), df.Path, err)
		}
		if s.onEntry != nil {
			s.onEntry(fi.Key(), fi.Value(), b, stored)
		}
	}
	if err := fi.Err(); err != nil {
		return fmt.Errorf("%s: %w", s.snap.Dir(), err)
	}
	return nil
}
