package plan

import (
	"fmt"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// RangeRow is one line of a compact bucket-to-worker table: consecutive
// workers that own the same number of buckets (0 for idle workers).
// Consecutive workers own consecutive ranges, so the row's buckets are
// BucketLo..BucketHi (-1 for a row of idle workers).
type RangeRow struct {
	WorkerLo    int `json:"worker_lo"`
	WorkerHi    int `json:"worker_hi"`
	BucketsEach int `json:"buckets_each"`
	BucketLo    int `json:"bucket_lo"`
	BucketHi    int `json:"bucket_hi"`
}

// WidthPlan is what a start at one width would look like.
type WidthPlan struct {
	WidthLoad
	Table []RangeRow `json:"table"`
	// Owners is how many workers own state: min(width, buckets).
	Owners int `json:"owners"`
	// Above N only: a suggested bucket count for `rebucket rewrite` and the
	// ways out, in words.
	SuggestedBuckets int      `json:"suggested_buckets,omitempty"`
	WaysOut          []string `json:"ways_out,omitempty"`
}

// ForWidth plans a start of the snapshot at width w.
func ForWidth(m *snapshotfmt.Manifest, w int) (WidthPlan, error) {
	if w < 1 || w > snapshotfmt.MaxWidth {
		return WidthPlan{}, fmt.Errorf("%w: width %d: want 1..%d (the most workers a snapshot can record)", snapshotfmt.ErrInvalidArgument, w, snapshotfmt.MaxWidth)
	}
	n := int(m.Partitioning.Buckets)
	p := WidthPlan{WidthLoad: LoadAt(m, w), Owners: min(w, n)}
	p.Table = CompactTable(w, n)
	if w > n {
		p.SuggestedBuckets = SuggestBuckets(n, w)
		p.WaysOut = []string{
			fmt.Sprintf("rewrite the snapshot into more buckets: `rebucket rewrite SNAPSHOT --buckets %d --out NEW` (a multiple of %d, so the rewrite is a split that runs near copy speed; `rebucket plan --recommend --peak-width %d` weighs other counts)", p.SuggestedBuckets, n, w),
			"rebuild the state from a dataset at a new count: `rebucket export` it, then `rebucket import --buckets M`",
			fmt.Sprintf("split the key space across two jobs with `rebucket split`, each running at most %d workers on its half", n),
			fmt.Sprintf("or start anyway: --on-excess cap runs %d workers, --on-excess idle runs %d of which %d own nothing", n, w, w-n),
		}
	}
	return p, nil
}

// CompactTable groups the workers of width w over n buckets into rows of
// consecutive workers owning the same number of buckets.
func CompactTable(w, n int) []RangeRow {
	var rows []RangeRow
	for i := 0; i < w; i++ {
		lo, hi, ok := snapshotfmt.WorkerRange(i, w, n)
		size := 0
		if ok {
			size = hi - lo + 1
		} else {
			lo, hi = -1, -1
		}
		if k := len(rows) - 1; k >= 0 && rows[k].BucketsEach == size && rows[k].WorkerHi == i-1 {
			rows[k].WorkerHi = i
			if ok {
				rows[k].BucketHi = hi
			}
			continue
		}
		rows = append(rows, RangeRow{WorkerLo: i, WorkerHi: i, BucketsEach: size, BucketLo: lo, BucketHi: hi})
	}
	return rows
}

// SuggestBuckets proposes a bucket count for a job at n buckets that must
// run w workers: a multiple of n (the rewrite is then a split) that w
// divides (every worker gets the same number of buckets) with room for 4x
// growth; if that is above the warning bound, the smallest multiple of n of
// at least 4w.
func SuggestBuckets(n, w int) int {
	l := lcm(n, w)
	c := l * ceilDiv(4*w, l)
	if c <= snapshotfmt.WarnBuckets {
		return c
	}
	c = n * ceilDiv(4*w, n)
	if c > snapshotfmt.MaxBuckets {
		c = n * (snapshotfmt.MaxBuckets / n)
	}
	return c
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

func ceilDiv(a, b int) int { return (a + b - 1) / b }
