package rewrite

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// SplitRule decides which entries of a split go to the first output.
type SplitRule struct {
	// Kind is "state", "key-prefix" or "buckets".
	Kind   string
	States []string // STEP/NAME
	Prefix []byte
	Lo, Hi uint32
}

// ParseSplitRule parses state=STEP/NAME[,STEP/NAME...], key-prefix=HEX or
// buckets=LO-HI.
func ParseSplitRule(s string) (SplitRule, error) {
	bad := func(f string, a ...any) (SplitRule, error) {
		return SplitRule{}, fmt.Errorf("%w: --by %q: %s", snapshotfmt.ErrInvalidArgument, s, fmt.Sprintf(f, a...))
	}
	kind, arg, ok := strings.Cut(s, "=")
	if !ok || arg == "" {
		return bad("want state=STEP/NAME[,...], key-prefix=HEX or buckets=LO-HI")
	}
	r := SplitRule{Kind: kind}
	switch kind {
	case "state":
		for _, q := range strings.Split(arg, ",") {
			if st, n, ok := strings.Cut(q, "/"); !ok || st == "" || n == "" {
				return bad("state %q: want STEP/NAME", q)
			}
			r.States = append(r.States, q)
		}
	case "key-prefix":
		p, err := hex.DecodeString(arg)
		if err != nil {
			return bad("the prefix is not hex: %v", err)
		}
		r.Prefix = p
	case "buckets":
		l, h, ok := strings.Cut(arg, "-")
		lo, err1 := strconv.ParseUint(l, 10, 32)
		hi, err2 := strconv.ParseUint(h, 10, 32)
		if !ok || err1 != nil || err2 != nil || lo > hi {
			return bad("want LO-HI with LO <= HI")
		}
		r.Lo, r.Hi = uint32(lo), uint32(hi)
	default:
		return bad("unknown rule %q", kind)
	}
	return r, nil
}

func (r SplitRule) String() string {
	switch r.Kind {
	case "state":
		return "state=" + strings.Join(r.States, ",")
	case "key-prefix":
		return "key-prefix=" + hex.EncodeToString(r.Prefix)
	default:
		return fmt.Sprintf("buckets=%d-%d", r.Lo, r.Hi)
	}
}

// SplitOptions describe a split of one snapshot into two.
type SplitOptions struct {
	Source string
	// OutA receives the entries matching Rule, OutB the rest.
	OutA, OutB    string
	Rule          SplitRule
	Parallelism   int
	FileSize      int64
	Compression   string
	Force         bool
	Note          string
	Tool          string
	SkipDiskCheck bool
	Progress      progress.Reporter
	// DryRun runs the checks and stops: nothing is written (Split returns
	// a nil summary and what the real run would refuse with).
	DryRun bool
}

// SplitSummary is what a split did.
type SplitSummary struct {
	Source         string        `json:"source"`
	OutA           string        `json:"out_a"`
	OutB           string        `json:"out_b"`
	Rule           string        `json:"rule"`
	EntriesA       uint64        `json:"entries_a"`
	EntriesB       uint64        `json:"entries_b"`
	BytesA         int64         `json:"data_bytes_a"`
	BytesB         int64         `json:"data_bytes_b"`
	SourceBytes    int64         `json:"source_bytes"`
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	BytesPerSecond float64       `json:"bytes_per_second"`
}

// Split writes the entries of opts.Source that match the rule to OutA and
// the rest to OutB: two complete snapshots with the source's partitioning,
// states table and per-worker state.
func Split(ctx context.Context, opts SplitOptions) (*SplitSummary, error) {
	start := time.Now()
	if opts.Parallelism < 1 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	src, err := reader.Open(opts.Source, reader.Options{})
	if err != nil {
		return nil, err
	}
	m := src.Manifest()
	if err := CheckPaths(opts.Source, opts.OutA); err != nil {
		return nil, err
	}
	if err := CheckPaths(opts.Source, opts.OutB); err != nil {
		return nil, err
	}
	if err := CheckPaths(opts.OutA, opts.OutB); err != nil {
		return nil, fmt.Errorf("the two outputs: %w", err)
	}
	var toA [1 << 16]bool
	match := func(dk snapshotfmt.DecodedKey) bool { return toA[dk.State] }
	switch opts.Rule.Kind {
	case "state":
		for _, q := range opts.Rule.States {
			st, ok := m.StateByName(q)
			if !ok {
				return nil, fmt.Errorf("%w: --by state: the snapshot has no keyed state %s", snapshotfmt.ErrInvalidArgument, q)
			}
			toA[st.ID] = true
		}
	case "key-prefix":
		p := opts.Rule.Prefix
		match = func(dk snapshotfmt.DecodedKey) bool { return bytes.HasPrefix(dk.Key, p) }
	case "buckets":
		lo, hi := opts.Rule.Lo, opts.Rule.Hi
		if hi >= m.Partitioning.Buckets {
			return nil, fmt.Errorf("%w: --by buckets=%d-%d: the snapshot has buckets 0..%d", snapshotfmt.ErrInvalidArgument, lo, hi, m.Partitioning.Buckets-1)
		}
		match = func(dk snapshotfmt.DecodedKey) bool { return dk.Bucket >= lo && dk.Bucket <= hi }
	default:
		return nil, fmt.Errorf("%w: split rule %q", snapshotfmt.ErrInvalidArgument, opts.Rule.Kind)
	}
	if !opts.SkipDiskCheck {
		// Both outputs together are about the source's size; on two
		// filesystems either may receive nearly all of it.
		need := m.DataBytes() + m.DataBytes()/20 + 2<<20
		if err := CheckDisk(opts.OutA, filepath.Dir(mustAbs(opts.OutA)), need, 0); err != nil {
			return nil, err
		}
		if err := CheckDisk(opts.OutB, filepath.Dir(mustAbs(opts.OutB)), need, 0); err != nil {
			return nil, err
		}
	}
	if opts.DryRun {
		if err := writer.CheckTarget(opts.OutA, opts.Force, "--out"); err != nil {
			return nil, err
		}
		return nil, writer.CheckTarget(opts.OutB, opts.Force, "--out")
	}
	header := func(side, what string) writer.Header {
		note := fmt.Sprintf("split by %s: %s %s", opts.Rule, side, what)
		if opts.Note != "" {
			note = opts.Note + "; " + note
		}
		return writer.Header{
			Partitioning: m.Partitioning, WidthAtWrite: m.WidthAtWrite, States: m.States, Tool: opts.Tool,
			Lineage: append(append([]snapshotfmt.Lineage{}, m.Lineage...), snapshotfmt.Lineage{
				Tool: opts.Tool, Action: "split", FromBuckets: m.Partitioning.Buckets, FromMapping: m.Partitioning.Mapping,
				ToBuckets: m.Partitioning.Buckets, ToMapping: m.Partitioning.Mapping, Note: note,
			}),
		}
	}
	wo := writer.Options{FileSize: opts.FileSize, Force: opts.Force, Compression: opts.Compression}
	wa, err := writer.Create(opts.OutA, header("A", "(entries that match)"), wo)
	if err != nil {
		return nil, err
	}
	wb, err := writer.Create(opts.OutB, header("B", "(entries that do not match)"), wo)
	if err != nil {
		wa.Abort()
		return nil, err
	}
	abort := func(err error) (*SplitSummary, error) {
		wa.Abort()
		wb.Abort()
		return nil, err
	}
	prog := progress.OrNop(opts.Progress)
	s, err := newSource(src, opts.Source, prog)
	if err != nil {
		return abort(err)
	}
	prog.Start(int64(m.TotalBytes()), "split")
	err = splitEntries(ctx, s, opts.Parallelism, match, wa, wb)
	prog.Finish()
	if err == nil {
		err = s.checkCounts()
	}
	if err == nil {
		var ws []workerStateOut
		for _, st := range m.WorkerStates {
			ws = append(ws, workerStateOut{src: st, step: st.Step, name: st.Name})
		}
		if err = copyWorkerStates(src, wa, ws); err == nil {
			err = copyWorkerStates(src, wb, ws)
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return abort(err)
	}
	// Seal both, check the count, and only then publish both, so a failure
	// anywhere before the two renames leaves neither output.
	ma, err := wa.Seal()
	if err != nil {
		wb.Abort()
		return nil, err
	}
	mb, err := wb.Seal()
	if err != nil {
		wa.Abort()
		return nil, err
	}
	sum := &SplitSummary{
		Source: opts.Source, OutA: opts.OutA, OutB: opts.OutB, Rule: opts.Rule.String(),
		EntriesA: ma.TotalEntries(), EntriesB: mb.TotalEntries(), BytesA: ma.DataBytes(), BytesB: mb.DataBytes(),
		SourceBytes: m.DataBytes(), Elapsed: time.Since(start),
	}
	if sum.EntriesA+sum.EntriesB != m.TotalEntries() {
		wa.Abort()
		wb.Abort()
		return sum, fmt.Errorf("internal error: the outputs would hold %d + %d entries, the source %d; nothing was published", sum.EntriesA, sum.EntriesB, m.TotalEntries())
	}
	if err := wa.Publish(); err != nil {
		wb.Abort()
		return nil, err
	}
	if err := wb.Publish(); err != nil {
		return nil, fmt.Errorf("%s was published but %s failed (remove %s before retrying): %w", opts.OutA, opts.OutB, opts.OutA, err)
	}
	sum.ElapsedSeconds = sum.Elapsed.Seconds()
	if sum.ElapsedSeconds > 0 {
		sum.BytesPerSecond = float64(sum.SourceBytes) / sum.ElapsedSeconds
	}
	return sum, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// splitEntries streams disjoint bucket ranges in parallel; each task writes
// its range's entries to one writer per output, so no two writers share a
// bucket and files never overlap.
func splitEntries(ctx context.Context, s *source, parallelism int, match func(snapshotfmt.DecodedKey) bool, wa, wb *writer.Snapshot) error {
	n := s.part.Buckets
	chunks := uint32(min(uint64(n), uint64(parallelism)*4))
	g, ctx := errgroup.WithContext(ctx)
	var next atomic.Uint32
	for range min(parallelism, int(chunks)) {
		g.Go(func() error {
			for {
				c := next.Add(1) - 1
				if c >= chunks {
					return nil
				}
				lo := uint32(uint64(c) * uint64(n) / uint64(chunks))
				hi := uint32(uint64(c+1)*uint64(n)/uint64(chunks)) - 1
				if err := splitRange(ctx, s, lo, hi, match, wa, wb); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

func splitRange(ctx context.Context, s *source, lo, hi uint32, match func(snapshotfmt.DecodedKey) bool, wa, wb *writer.Snapshot) error {
	st := s.newStream(ctx, s.spansOf(lo, hi))
	defer st.Close()
	var a, b *writer.BucketWriter
	fail := func(err error) error {
		for _, w := range []*writer.BucketWriter{a, b} {
			if w != nil {
				w.Abort()
			}
		}
		return err
	}
	for st.Next() {
		dk, _ := snapshotfmt.DecodeKey(st.key) // the stream decoded it already
		var w *writer.BucketWriter
		if match(dk) {
			if a == nil {
				a = wa.NewBucketWriter()
			}
			w = a
		} else {
			if b == nil {
				b = wb.NewBucketWriter()
			}
			w = b
		}
		if err := w.Add(st.key, st.val); err != nil {
			return fail(err)
		}
	}
	if err := st.Err(); err != nil {
		return fail(err)
	}
	for _, w := range []**writer.BucketWriter{&a, &b} {
		if *w != nil {
			err := (*w).Close()
			*w = nil
			if err != nil {
				return fail(err)
			}
		}
	}
	return nil
}
