package snapshotfmt

import "fmt"

// WorkerRange returns the buckets worker i of w owns among n buckets: the
// contiguous range [ceil(i*n/w), ceil((i+1)*n/w) - 1]. ok is false when the
// range is empty, which happens only for w > n.
func WorkerRange(i, w, n int) (lo, hi int, ok bool) {
	lo = ceilDiv(i*n, w)
	hi = ceilDiv((i+1)*n, w) - 1
	return lo, hi, lo <= hi
}

// OwnerOf returns the worker of w that owns bucket b among n buckets.
// From the range formula: ceil(i*n/w) <= b < ceil((i+1)*n/w) holds exactly
// when i <= b*w/n < i+1, so the owner is floor(b*w/n).
func OwnerOf(b, w, n int) int { return b * w / n }

// IdleWorkers lists the workers of w that own no bucket among n.
func IdleWorkers(w, n int) []int {
	var idle []int
	for i := 0; i < w; i++ {
		if _, _, ok := WorkerRange(i, w, n); !ok {
			idle = append(idle, i)
		}
	}
	return idle
}

// CheckWidth reports whether a start at width w can own state with n buckets.
func CheckWidth(w, n int) error {
	if w < 1 {
		return fmt.Errorf("%w: width %d: want at least 1", ErrInvalidArgument, w)
	}
	if w > n {
		return fmt.Errorf("%w: width %d is above the bucket count %d: at most %d workers can own state; %s, or start with --on-excess cap|idle",
			ErrRefused, w, n, n, RaiseHint(w, n))
	}
	return nil
}

// RaiseHint tells how to make room for w workers over n buckets: a rewrite
// to the smallest multiple of n that is at least w (a split, the cheapest
// rewrite), and where to weigh other counts.
func RaiseHint(w, n int) string {
	m := ceilDiv(w, n) * n
	if m > MaxBuckets {
		m = MaxBuckets
	}
	return fmt.Sprintf("raise the count with `rebucket rewrite SNAPSHOT --buckets %d --out NEW` (%d is the smallest multiple of %d that is at least %d, so the rewrite is a split; `rebucket plan --recommend --peak-width %d` weighs counts with headroom)", m, m, n, w, w)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
