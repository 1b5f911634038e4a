// Package plan answers what-if questions from a snapshot's manifest: the
// load of each worker at a width, whether a width can own state, what a
// rewrite to another bucket count will do and cost, and which bucket count
// to choose for a job.
package plan

import (
	"fmt"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// WorkerLoad is what one worker owns at a width.
type WorkerLoad struct {
	Worker   int    `json:"worker"`
	Owns     bool   `json:"owns_state"`
	BucketLo int    `json:"bucket_lo"`
	BucketHi int    `json:"bucket_hi"`
	Buckets  int    `json:"buckets"`
	Entries  uint64 `json:"entries"`
	Bytes    uint64 `json:"bytes"`
}

// MaxListedWorkers bounds the per-worker rows of a WidthLoad: up to this
// width (the most buckets a snapshot can have, so every width at which all
// workers can own state) every worker is listed; above it only the workers
// that own state are, and the idle ones as ranges. The listing, and
// `inspect --json` of a manifest written at 1,048,576 workers, then stay
// within O(buckets): before, that 4 KB manifest took 846 MB and printed
// 208 MB.
const MaxListedWorkers = snapshotfmt.MaxBuckets

// Range is an inclusive range of worker numbers.
type Range struct {
	Lo int `json:"lo"`
	Hi int `json:"hi"`
}

// WidthLoad is the per-worker load of a start at one width, from the
// snapshot's real per-bucket sizes.
type WidthLoad struct {
	Width    int  `json:"width"`
	Buckets  int  `json:"buckets"`
	Feasible bool `json:"feasible"` // width <= buckets
	// Workers is every worker in order, or above MaxListedWorkers only
	// those that own state (AllListed false).
	Workers []WorkerLoad `json:"workers"`
	// Idle lists the workers that own nothing, empty above
	// MaxListedWorkers; IdleCount and IdleRanges say the same at any
	// width (at most buckets+1 ranges).
	Idle       []int   `json:"idle_workers"`
	IdleCount  int     `json:"idle_count"`
	IdleRanges []Range `json:"idle_ranges"`
	AllListed  bool    `json:"all_workers_listed"`
	// MaxBytes and MeanBytes are over the workers that own state;
	// Imbalance is max/mean (1 is perfectly even).
	MaxBytes  uint64  `json:"max_bytes"`
	MeanBytes float64 `json:"mean_bytes"`
	Imbalance float64 `json:"imbalance"`
}

// LoadAt computes the load of every worker at width w (w >= 1). Above the
// bucket count the surplus workers are idle.
func LoadAt(m *snapshotfmt.Manifest, w int) WidthLoad {
	n := int(m.Partitioning.Buckets)
	wl := WidthLoad{Width: w, Buckets: n, Feasible: w <= n, AllListed: w <= MaxListedWorkers,
		Idle: []int{}, IdleRanges: []Range{}}
	var sum uint64
	owners := 0
	for i := 0; i < w; i++ {
		lo, hi, ok := snapshotfmt.WorkerRange(i, w, n)
		l := WorkerLoad{Worker: i, Owns: ok}
		if ok {
			l.BucketLo, l.BucketHi, l.Buckets = lo, hi, hi-lo+1
			for b := lo; b <= hi; b++ {
				l.Entries += m.BucketEntries[b]
				l.Bytes += m.BucketBytes[b]
			}
			owners++
			sum += l.Bytes
			wl.MaxBytes = max(wl.MaxBytes, l.Bytes)
		} else {
			l.BucketLo, l.BucketHi = -1, -1
			wl.IdleCount++
			if k := len(wl.IdleRanges) - 1; k >= 0 && wl.IdleRanges[k].Hi == i-1 {
				wl.IdleRanges[k].Hi = i
			} else {
				wl.IdleRanges = append(wl.IdleRanges, Range{i, i})
			}
			if !wl.AllListed {
				continue
			}
			wl.Idle = append(wl.Idle, i)
		}
		wl.Workers = append(wl.Workers, l)
	}
	if owners > 0 {
		wl.MeanBytes = float64(sum) / float64(owners)
	}
	if wl.MeanBytes > 0 {
		wl.Imbalance = float64(wl.MaxBytes) / wl.MeanBytes
	}
	return wl
}

// FormatRanges writes ranges as "2, 5, 8-11", the first most of them,
// then how many workers there are in all.
func FormatRanges(rs []Range, most int) string {
	var b strings.Builder
	count := 0
	for i, r := range rs {
		count += r.Hi - r.Lo + 1
		if i >= most {
			continue
		}
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case r.Lo == r.Hi:
			fmt.Fprintf(&b, "%d", r.Lo)
		case r.Hi == r.Lo+1:
			fmt.Fprintf(&b, "%d, %d", r.Lo, r.Hi)
		default:
			fmt.Fprintf(&b, "%d-%d", r.Lo, r.Hi)
		}
	}
	if len(rs) > most {
		fmt.Fprintf(&b, ", ... (%d in all)", count)
	}
	return b.String()
}

// Bin is one bar of a bucket-size histogram: how many buckets hold between
// LoBytes and HiBytes (inclusive) logical bytes.
type Bin struct {
	LoBytes uint64 `json:"lo_bytes"`
	HiBytes uint64 `json:"hi_bytes"`
	Buckets int    `json:"buckets"`
}

// BucketHistogram spreads bucket sizes (a manifest's BucketBytes) over at
// most bins equal-width bins from the smallest to the largest bucket.
func BucketHistogram(bucketBytes []uint64, bins int) []Bin {
	if len(bucketBytes) == 0 || bins < 1 {
		return nil
	}
	lo, hi := bucketBytes[0], bucketBytes[0]
	for _, b := range bucketBytes {
		lo, hi = min(lo, b), max(hi, b)
	}
	span := hi - lo + 1
	if uint64(bins) > span {
		bins = int(span)
	}
	width := (span + uint64(bins) - 1) / uint64(bins)
	out := make([]Bin, bins)
	for i := range out {
		out[i].LoBytes = lo + uint64(i)*width
		out[i].HiBytes = min(hi, out[i].LoBytes+width-1)
	}
	for _, b := range bucketBytes {
		out[(b-lo)/width].Buckets++
	}
	return out
}

// MaxLoadStores bounds the worker stores one `load` builds. Each is a
// Pebble store of its own (about 32 KiB and 20 ms even when idle), so
// `load --width 70000 --on-excess idle` built 70,000 of them, about 2 GiB
// and 20 minutes, without a word. A wider start is loaded a subset of
// workers at a time (--workers).
const MaxLoadStores = 4096

// CheckLoadStores refuses a load that would build more than MaxLoadStores
// stores (build of them, at a start of width workers of which idle own
// nothing), saying how to load it instead.
func CheckLoadStores(build, width, idle int) error {
	if build <= MaxLoadStores {
		return nil
	}
	what := ""
	if idle > 0 {
		what = fmt.Sprintf(" (%d of the %d workers own no bucket and would get an empty store)", idle, width)
	}
	return fmt.Errorf("%w: this load would build %d worker stores%s; one load builds at most %d: pick the workers to build with --workers (for example --workers 0,1,2), a width of at most the bucket count, or --on-excess cap",
		snapshotfmt.ErrInvalidArgument, build, what, MaxLoadStores)
}
