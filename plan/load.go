// Package plan answers what-if questions from a snapshot's manifest: the
// load of each worker at a width, whether a width can own state, what a
// rewrite to another bucket count will do and cost, and which bucket count
// to choose for a job.
package plan

import (
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

// WidthLoad is the per-worker load of a start at one width, from the
// snapshot's real per-bucket sizes.
type WidthLoad struct {
	Width    int          `json:"width"`
	Buckets  int          `json:"buckets"`
	Feasible bool         `json:"feasible"` // width <= buckets
	Workers  []WorkerLoad `json:"workers"`
	Idle     []int        `json:"idle_workers"`
	// MaxBytes and MeanBytes are over the workers that own state;
	// Imbalance is max/mean (1 is perfectly even).
	MaxBytes  uint64  `json:"max_bytes"`
	MeanBytes float64 `json:"mean_bytes"`
	Imbalance float64 `json:"imbalance"`
}

// LoadAt computes the load of every worker at width w (w >= 1). Above the
// bucket count the surplus workers are listed as idle.
func LoadAt(m *snapshotfmt.Manifest, w int) WidthLoad {
	n := int(m.Partitioning.Buckets)
	wl := WidthLoad{Width: w, Buckets: n, Feasible: w <= n}
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
	if wl.Idle == nil {
		wl.Idle = []int{}
	}
	return wl
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
