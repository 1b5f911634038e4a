package spark

import (
	"math/rand/v2"
	"testing"
)

// hashSeen agrees with a map on random, clustered (all in a few buckets,
// colliding low bits) and tiny inputs, zeros included.
func TestHashSeen(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 100, 5000, 200000} {
		for _, kind := range []string{"uniform", "clustered", "low-bits", "dup-first-last", "dup-middle", "zeros"} {
			a := make([]uint64, n)
			for i := range a {
				switch kind {
				case "clustered":
					a[i] = uint64(r.IntN(3))<<56 | r.Uint64()>>8
				case "low-bits": // same low 20 bits: long probe runs
					a[i] = r.Uint64()<<20 | 0xABCDE
				default:
					a[i] = r.Uint64()
				}
			}
			if n >= 2 {
				switch kind {
				case "dup-first-last":
					a[n-1] = a[0]
				case "dup-middle":
					a[n/2] = a[n/3]
				case "zeros":
					a[0], a[n-1] = 0, 0
				}
			}
			seen := map[uint64]bool{}
			want := false
			for _, x := range a {
				want = want || seen[x]
				seen[x] = true
			}
			var s hashSeen
			for _, x := range a {
				s.add(x)
			}
			if got := s.hasDup(); got != want {
				t.Fatalf("n=%d %s: hasDup %v, want %v", n, kind, got, want)
			}
		}
	}
}

func BenchmarkHashSeen5M(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]uint64, 5_000_000)
	for i := range src {
		src[i] = r.Uint64()
	}
	for b.Loop() {
		var s hashSeen
		for _, x := range src {
			s.add(x)
		}
		if s.hasDup() {
			b.Fatal("dup")
		}
	}
}
