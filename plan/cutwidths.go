package plan

import (
	"fmt"
	"slices"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// MaxDefaultCutWidth bounds the widths a rewrite cuts its files for by
// default: each width W adds up to W file boundaries, so cutting for every
// width a large count allows (M/4 workers and their divisors) would bring
// back a file per few buckets. Wider starts are asked for with
// `rewrite --for-width`.
const MaxDefaultCutWidth = 64

// DefaultCutWidths are the widths a rewrite into m buckets cuts its files
// for unless told otherwise: the widths `plan --recommend` names for a
// count of m (those that divide m and leave each worker at least
// snapshotfmt.DefaultHeadroom buckets), up to MaxDefaultCutWidth, and the
// width the snapshot was written at.
func DefaultCutWidths(m, widthAtWrite int) []int {
	var out []int
	for _, d := range divisors(m) {
		if d <= MaxDefaultCutWidth && m/d >= snapshotfmt.DefaultHeadroom {
			out = append(out, d)
		}
	}
	if widthAtWrite >= 1 {
		out = append(out, widthAtWrite)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckCutWidths refuses widths outside 1..snapshotfmt.MaxWidth and
// returns them sorted without repeats.
func CheckCutWidths(ws []int) ([]int, error) {
	out := slices.Clone(ws)
	for _, w := range out {
		if w < 1 || w > snapshotfmt.MaxWidth {
			return nil, fmt.Errorf("%w: --for-width %d: want 1..%d", snapshotfmt.ErrInvalidArgument, w, snapshotfmt.MaxWidth)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CutFor reports whether the files of m were cut for width w: recorded in
// its cut_widths, or found so (no file holds buckets of two workers at w,
// as when every file holds one bucket).
func CutFor(m *snapshotfmt.Manifest, w int) bool {
	if slices.Contains(m.CutWidths, w) {
		return true
	}
	n := int(m.Partitioning.Buckets)
	for _, f := range m.Files {
		if snapshotfmt.OwnerOf(int(f.BucketLo), w, n) != snapshotfmt.OwnerOf(int(f.BucketHi), w, n) {
			return false
		}
	}
	return true
}
