package plan

import (
	"fmt"
	"path/filepath"
	"strings"

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
	SuggestedBuckets int `json:"suggested_buckets,omitempty"`
	// FilesCut is true when no data file holds buckets of two workers at
	// this width (see CutFor): a load ingests every file whole.
	FilesCut bool     `json:"files_cut_for_width"`
	WaysOut  []string `json:"ways_out,omitempty"`
}

// ForWidth plans a start of the snapshot at width w.
func ForWidth(m *snapshotfmt.Manifest, w int) (WidthPlan, error) {
	if w < 1 || w > snapshotfmt.MaxWidth {
		return WidthPlan{}, fmt.Errorf("%w: width %d: want 1..%d (the most workers a snapshot can record)", snapshotfmt.ErrInvalidArgument, w, snapshotfmt.MaxWidth)
	}
	n := int(m.Partitioning.Buckets)
	p := WidthPlan{WidthLoad: LoadAt(m, w), Owners: min(w, n), FilesCut: CutFor(m, w)}
	p.Table = CompactTable(w, n)
	if w > n {
		p.SuggestedBuckets = SuggestBuckets(n, w)
		p.WaysOut = WaysOut("", n, w)
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

// SuggestBuckets is snapshotfmt.SuggestBuckets, the one rule every
// suggestion of a bucket count follows.
func SuggestBuckets(n, w int) int { return snapshotfmt.SuggestBuckets(n, w) }

// WaysOut lists, as copy-pasteable commands on the snapshot at src, the ways
// to run w workers over n buckets. With src "" (a caller that does not know
// the path) the commands are described in words instead.
func WaysOut(src string, n, w int) []string {
	m := SuggestBuckets(n, w)
	if src == "" {
		return []string{
			fmt.Sprintf("rewrite the snapshot into %d buckets with `rebucket rewrite` (a multiple of %d, so the rewrite is a split that runs near copy speed; `rebucket plan --recommend --peak-width %d` weighs other counts)", m, n, w),
			fmt.Sprintf("rebuild the state from a dataset at a new count: `rebucket export` it, then `rebucket import --buckets %d`", m),
			fmt.Sprintf("split the key space across two jobs with `rebucket split`, each running at most %d workers on its half", n),
			fmt.Sprintf("or start anyway: --on-excess cap runs %d workers, --on-excess idle runs %d of which %d own nothing", n, w, w-n),
		}
	}
	target := SuggestTarget(src, m)
	ways := []string{
		fmt.Sprintf("rewrite the snapshot into %d buckets (a multiple of %d, so the rewrite is a split that runs near copy speed): `rebucket rewrite %s --buckets %d --out %s`; `rebucket plan --recommend --peak-width %d` weighs other counts", m, n, ShellQuote(src), m, ShellQuote(target), w),
		fmt.Sprintf("rebuild the state from a dataset at a new count: `rebucket export %s --out %s` then `rebucket import %s --buckets %d --out %s`", ShellQuote(src), ShellQuote(src+".parquet"), ShellQuote(src+".parquet"), m, ShellQuote(target)),
	}
	if n >= 2 {
		ways = append(ways, fmt.Sprintf("split the key space across two jobs with `rebucket split %s --out %s --out %s --by buckets=0-%d`, each running at most %d workers on its half", ShellQuote(src), ShellQuote(src+"-a"), ShellQuote(src+"-b"), n/2-1, n/2))
	}
	return append(ways, fmt.Sprintf("or start anyway: --on-excess cap runs %d workers, --on-excess idle runs %d of which %d own nothing", n, w, w-n))
}

// SuggestTarget names the output of a suggested rewrite of src to m
// buckets: src's path with "-M" appended.
func SuggestTarget(src string, m int) string {
	return fmt.Sprintf("%s-%d", filepath.Clean(src), m)
}

// ShellQuote quotes s for a POSIX shell when it needs it, so that suggested
// commands can be pasted as they are.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

func ceilDiv(a, b int) int { return (a + b - 1) / b }
