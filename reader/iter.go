package reader

import (
	"context"
	"fmt"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Iter iterates the entries of a bucket range across files, in key order.
type Iter struct {
	ctx          context.Context
	s            *Snapshot
	files        []snapshotfmt.DataFile
	lower, upper []byte
	cur          *FileIter
	err          error
}

// NewIter iterates buckets lo..hi (inclusive).
func (s *Snapshot) NewIter(ctx context.Context, lo, hi uint32) *Iter {
	return &Iter{
		ctx: ctx, s: s, files: s.FilesIn(lo, hi),
		lower: snapshotfmt.BucketPrefix(lo), upper: snapshotfmt.BucketUpperBound(hi),
	}
}

// NewIterAll iterates every entry of the snapshot.
func (s *Snapshot) NewIterAll(ctx context.Context) *Iter {
	return &Iter{ctx: ctx, s: s, files: s.m.Files}
}

// NewWorkerIter iterates the buckets worker i of width w owns (nothing for
// an idle worker).
func (s *Snapshot) NewWorkerIter(ctx context.Context, i, w int) *Iter {
	lo, hi, ok := s.WorkerBuckets(i, w)
	if !ok {
		return &Iter{ctx: ctx, s: s}
	}
	return s.NewIter(ctx, lo, hi)
}

// Next advances to the next entry.
func (it *Iter) Next() bool {
	for it.err == nil {
		if it.cur != nil {
			if it.cur.Next() {
				return true
			}
			if err := it.cur.Err(); err != nil {
				it.err = err
			}
			if err := it.cur.Close(); err != nil && it.err == nil {
				it.err = fmt.Errorf("close %s: %w", it.cur.df.Path, err)
			}
			it.cur = nil
			continue
		}
		if len(it.files) == 0 {
			return false
		}
		if err := it.ctx.Err(); err != nil {
			it.err = err
			return false
		}
		df := it.files[0]
		it.files = it.files[1:]
		lower, upper := it.lower, it.upper
		if lower != nil && string(df.SmallestKey()) >= string(lower) {
			lower = nil
		}
		if upper != nil && string(df.LargestKey()) < string(upper) {
			upper = nil
		}
		fi, err := it.s.OpenFile(it.ctx, df, lower, upper)
		if err != nil {
			it.err = err
			return false
		}
		it.cur = fi
	}
	return false
}

// Key is the current encoded key; valid until the next call to Next.
func (it *Iter) Key() []byte { return it.cur.Key() }

// Value is the current value; valid until the next call to Next.
func (it *Iter) Value() []byte { return it.cur.Value() }

// Err is the error that stopped iteration.
func (it *Iter) Err() error { return it.err }

// Close releases any open file.
func (it *Iter) Close() error {
	if it.cur != nil {
		err := it.cur.Close()
		it.cur = nil
		return err
	}
	return nil
}
