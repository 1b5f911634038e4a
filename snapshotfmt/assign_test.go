package snapshotfmt

import (
	"errors"
	"strings"
	"testing"
)

// TestWorkerRangeProperties checks the assignment formula for every N up to
// 300 and every W up to N: ranges are contiguous, in worker order, cover
// [0, N) exactly once, and their sizes differ by at most one.
func TestWorkerRangeProperties(t *testing.T) {
	for n := 1; n <= 300; n++ {
		for w := 1; w <= n; w++ {
			next, minSize, maxSize := 0, n+1, -1
			for i := 0; i < w; i++ {
				lo, hi, ok := WorkerRange(i, w, n)
				if !ok {
					t.Fatalf("N=%d W=%d: worker %d owns nothing though W <= N", n, w, i)
				}
				if lo != next {
					t.Fatalf("N=%d W=%d: worker %d starts at %d, want %d (contiguous, in order)", n, w, i, lo, next)
				}
				size := hi - lo + 1
				minSize, maxSize = min(minSize, size), max(maxSize, size)
				for b := lo; b <= hi; b++ {
					if o := OwnerOf(b, w, n); o != i {
						t.Fatalf("N=%d W=%d: OwnerOf(%d) = %d, WorkerRange gives it to %d", n, w, b, o, i)
					}
				}
				next = hi + 1
			}
			if next != n {
				t.Fatalf("N=%d W=%d: ranges end at %d, want %d", n, w, next, n)
			}
			if maxSize-minSize > 1 {
				t.Fatalf("N=%d W=%d: range sizes %d..%d differ by more than one", n, w, minSize, maxSize)
			}
			if idle := IdleWorkers(w, n); len(idle) != 0 {
				t.Fatalf("N=%d W=%d: idle workers %v", n, w, idle)
			}
		}
	}
}

// TestWorkerRangeAboveN: for W > N, exactly W-N workers are idle, the rest
// own one bucket each in order, and OwnerOf agrees with WorkerRange.
func TestWorkerRangeAboveN(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for w := n + 1; w <= 3*n+5; w++ {
			next := 0
			idle := 0
			for i := 0; i < w; i++ {
				lo, hi, ok := WorkerRange(i, w, n)
				if !ok {
					idle++
					continue
				}
				if lo != next || hi != lo {
					t.Fatalf("N=%d W=%d: worker %d owns %d..%d, want %d..%d", n, w, i, lo, hi, next, next)
				}
				if o := OwnerOf(lo, w, n); o != i {
					t.Fatalf("N=%d W=%d: OwnerOf(%d) = %d, want %d", n, w, lo, o, i)
				}
				next++
			}
			if next != n || idle != w-n {
				t.Fatalf("N=%d W=%d: %d buckets owned, %d idle; want %d and %d", n, w, next, idle, n, w-n)
			}
			if got := len(IdleWorkers(w, n)); got != w-n {
				t.Fatalf("N=%d W=%d: IdleWorkers has %d, want %d", n, w, got, w-n)
			}
		}
	}
}

// TestWorkerRangeLarge checks the formula at the format's limits, where
// i*N must not overflow.
func TestWorkerRangeLarge(t *testing.T) {
	n := MaxBuckets
	for _, w := range []int{1, 3, 7, 1000, 65535, 65536, 70000, 1 << 20} {
		if lo, _, ok := WorkerRange(0, w, n); lo != 0 || !ok {
			t.Errorf("W=%d: worker 0 starts at %d (ok %v), want 0", w, lo, ok)
		}
		for _, b := range []int{0, 1, n / 2, n - 2, n - 1} {
			o := OwnerOf(b, w, n)
			lo, hi, ok := WorkerRange(o, w, n)
			if o < 0 || o >= w || !ok || b < lo || b > hi {
				t.Errorf("W=%d: OwnerOf(%d) = %d, which owns %d..%d (ok %v)", w, b, o, lo, hi, ok)
			}
		}
		if w <= n {
			if _, hi, ok := WorkerRange(w-1, w, n); hi != n-1 || !ok {
				t.Errorf("W=%d: last worker ends at %d, want %d", w, hi, n-1)
			}
		}
	}
}

func TestCheckWidth(t *testing.T) {
	for _, tc := range []struct {
		w, n int
		want error
	}{
		{1, 1, nil}, {4, 8, nil}, {8, 8, nil},
		{0, 8, ErrInvalidArgument}, {-1, 8, ErrInvalidArgument},
		{9, 8, ErrRefused}, {200, 128, ErrRefused},
	} {
		err := CheckWidth(tc.w, tc.n)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckWidth(%d, %d) = %v, want %v", tc.w, tc.n, err, tc.want)
		}
	}
}

func TestRaiseHintSuggestsASplit(t *testing.T) {
	for _, tc := range []struct {
		w, n int
		want string
	}{
		{40, 8, "into 160 buckets"},
		{40, 16, "into 160 buckets"},
		{12, 8, "into 48 buckets"},
		{70000, 8, "into 65536 buckets"},
	} {
		if got := RaiseHint(tc.w, tc.n); !strings.Contains(got, tc.want) {
			t.Errorf("RaiseHint(%d, %d) = %q, want it to contain %q", tc.w, tc.n, got, tc.want)
		}
	}
}
