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

// CheckWidth reports whether a start at width w can own state with n
// buckets; above n the error is a *WidthError (errors.Is ErrRefused).
func CheckWidth(w, n int) error {
	if w < 1 {
		return fmt.Errorf("%w: width %d: want at least 1", ErrInvalidArgument, w)
	}
	if w > n {
		return &WidthError{Width: w, Buckets: n}
	}
	return nil
}

// WidthError is the refusal of a start at a width above the bucket count.
// Commands that know the snapshot's path turn it into copy-pasteable
// commands (SuggestBuckets gives the count).
type WidthError struct{ Width, Buckets int }

func (e *WidthError) Error() string {
	return fmt.Sprintf("%v: width %d is above the bucket count %d: at most %d workers can own state; %s, or start with --on-excess cap|idle",
		ErrRefused, e.Width, e.Buckets, e.Buckets, RaiseHint(e.Width, e.Buckets))
}

func (e *WidthError) Is(target error) bool { return target == ErrRefused }

// DefaultHeadroom is the growth factor above the width that a suggested
// bucket count allows.
const DefaultHeadroom = 4

// SuggestBuckets is the one rule for the bucket count to rewrite a snapshot
// of n buckets to so that w workers can own state, used by every command
// that suggests one (the refusals of load and verify --width, plan --widths
// and plan SNAPSHOT --recommend): the smallest count of at least
// DefaultHeadroom*w that both n (so the rewrite is a split) and w (so every
// worker owns as many buckets) divide. If that is above WarnBuckets, the
// smallest multiple of n of at least DefaultHeadroom*w (capped at
// MaxBuckets).
func SuggestBuckets(n, w int) int {
	floor := DefaultHeadroom * w
	l := n / gcd(n, w) * w
	if c := l * ceilDiv(floor, l); c <= WarnBuckets {
		return c
	}
	c := n * ceilDiv(floor, n)
	if c > MaxBuckets {
		c = n * (MaxBuckets / n)
	}
	return c
}

// RaiseHint tells, in words, how to make room for w workers over n buckets.
func RaiseHint(w, n int) string {
	m := SuggestBuckets(n, w)
	return fmt.Sprintf("raise the count with a rewrite into %d buckets (a multiple of %d, so the rewrite is a split, with room for %dx growth past %d workers; `rebucket plan --recommend --peak-width %d` weighs other counts)", m, n, DefaultHeadroom, w, w)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
