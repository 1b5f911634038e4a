package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Bookkeeping estimates per bucket, measured on manifests this tool
// writes: two per-bucket stats of about 14 bytes each in the indented JSON,
// and about 480 bytes per data file entry (path, bounds as hex keys,
// counts, checksum). The file estimate is an upper bound: a rewrite cuts
// files by size and at the cut widths (rewrite --for-width), not per bucket.
const (
	manifestBaseBytes    = 2 << 10
	manifestBucketBytes  = 28
	manifestFileBytes    = 480
	defaultHeadroom      = 4
	maxAlternatives      = 4
	alternativeSpanRatio = 16
)

// CountOption is one bucket count and what it costs.
type CountOption struct {
	Buckets int `json:"buckets"`
	// Divisors is every width at which each worker owns the same number of
	// buckets.
	Divisors []int `json:"divisors"`
	// BucketsPerWorkerAtPeak is Buckets / peak width.
	BucketsPerWorkerAtPeak float64 `json:"buckets_per_worker_at_peak"`
	// ManifestBytes estimates the manifest of a snapshot at this count: its
	// per-bucket stats and the fewest files a rewrite leaves (Files).
	ManifestBytes int64 `json:"manifest_bytes_estimate"`
	// Files is the fewest data files a rewrite to this count writes with
	// the default cut widths (one per worker of the widest, at most
	// MaxDefaultCutWidth); more when the data needs more by size.
	Files int  `json:"min_files_after_split"`
	Warn  bool `json:"above_warning"`
}

// Recommendation is the answer of Recommend.
type Recommendation struct {
	PeakWidth    int           `json:"peak_width"`
	Headroom     int           `json:"headroom"`
	Widths       []int         `json:"widths"`
	LCM          int           `json:"lcm_of_widths"`
	Recommended  CountOption   `json:"recommended"`
	Alternatives []CountOption `json:"alternatives"`
	Warnings     []string      `json:"warnings"`
	// Record is a short paragraph for the job's deployment record.
	Record string `json:"record"`
}

// Recommend chooses a bucket count for a job whose width may reach peak:
// the smallest count of at least headroom*peak (headroom 0 means 4) that
// every width in widths divides (nil means peak and its divisors), and a
// few larger alternatives that divide by more widths.
func Recommend(peak, headroom int, widths []int) (Recommendation, error) {
	if peak < 1 || peak > snapshotfmt.MaxBuckets {
		return Recommendation{}, fmt.Errorf("%w: peak width %d: want 1..%d (no bucket count can give more workers state)", snapshotfmt.ErrInvalidArgument, peak, snapshotfmt.MaxBuckets)
	}
	if headroom == 0 {
		headroom = defaultHeadroom
	}
	if headroom < 1 || headroom > snapshotfmt.MaxBuckets {
		return Recommendation{}, fmt.Errorf("%w: headroom %d: want 1..%d", snapshotfmt.ErrInvalidArgument, headroom, snapshotfmt.MaxBuckets)
	}
	if len(widths) == 0 {
		widths = divisors(peak)
	}
	widths = slices.Clone(widths)
	slices.Sort(widths)
	widths = slices.Compact(widths)
	l := 1
	for _, w := range widths {
		if w < 1 {
			return Recommendation{}, fmt.Errorf("%w: width %d: want at least 1", snapshotfmt.ErrInvalidArgument, w)
		}
		l = lcm(l, w)
		if l > snapshotfmt.MaxBuckets {
			return Recommendation{}, fmt.Errorf("%w: no bucket count up to %d divides by every width of %s (their least common multiple is above it); drop a width", snapshotfmt.ErrInvalidArgument, snapshotfmt.MaxBuckets, intList(widths))
		}
	}
	floor := headroom * peak
	c := l * ceilDiv(floor, l)
	if c > snapshotfmt.MaxBuckets {
		return Recommendation{}, fmt.Errorf("%w: the smallest count of at least %d x %d = %d that divides by %s is %d, above the limit of %d buckets; lower --headroom or the widths", snapshotfmt.ErrInvalidArgument, headroom, peak, floor, intList(widths), c, snapshotfmt.MaxBuckets)
	}
	r := Recommendation{PeakWidth: peak, Headroom: headroom, Widths: widths, LCM: l, Warnings: []string{}, Alternatives: []CountOption{}}
	r.Recommended = countOption(c, peak)
	// Alternatives: larger multiples of l, each dividing by more widths
	// than every count before it (record-setters in divisor count, the
	// highly composite ones), within a span of the recommendation.
	best := len(r.Recommended.Divisors)
	for k := c + l; k <= min(snapshotfmt.MaxBuckets, alternativeSpanRatio*c) && len(r.Alternatives) < maxAlternatives; k += l {
		if d := numDivisors(k); d > best {
			best = d
			r.Alternatives = append(r.Alternatives, countOption(k, peak))
		}
	}
	if r.Recommended.Warn {
		r.Warnings = append(r.Warnings, BookkeepingWarning(c))
	}
	r.Record = r.record()
	return r, nil
}

// RecommendFor is Recommend for a job whose snapshot has n buckets: n joins
// the widths the count must divide by, so that the rewrite to it is a
// split. For widths nil it names the same count as SuggestBuckets(n, peak)
// (below the warning bound): one rule for every suggestion.
func RecommendFor(n, peak, headroom int, widths []int) (Recommendation, error) {
	if len(widths) == 0 && peak >= 1 {
		widths = divisors(peak)
	}
	return Recommend(peak, headroom, append(slices.Clone(widths), n))
}

// BookkeepingWarning explains the cost of a count above the warning bound.
func BookkeepingWarning(n int) string {
	return fmt.Sprintf("%d buckets is above %d: every bucket costs bookkeeping whether or not it holds data: per-bucket stats in the manifest (a manifest of about %s) and per-bucket metadata that every worker reads at each restart",
		n, snapshotfmt.WarnBuckets, units.Bytes(manifestEstimate(n)))
}

func manifestEstimate(n int) int64 {
	return manifestBaseBytes + int64(n)*manifestBucketBytes + int64(minFiles(n))*manifestFileBytes
}

// minFiles is the fewest data files a rewrite to n buckets leaves with the
// default cut widths: one per worker of the widest.
func minFiles(n int) int {
	w := slices.Max(DefaultCutWidths(n, 1))
	return min(n, w)
}

func countOption(n, peak int) CountOption {
	return CountOption{
		Buckets: n, Divisors: divisors(n), BucketsPerWorkerAtPeak: float64(n) / float64(peak),
		ManifestBytes: manifestEstimate(n), Files: minFiles(n), Warn: n > snapshotfmt.WarnBuckets,
	}
}

func (r Recommendation) record() string {
	c := r.Recommended
	var b strings.Builder
	fmt.Fprintf(&b, "Bucket count: %d. ", c.Buckets)
	fmt.Fprintf(&b, "It is the smallest count of at least %d x %d = %d (the peak width of %d workers with %dx headroom) that divides evenly by every planned width (%s), ",
		r.Headroom, r.PeakWidth, r.Headroom*r.PeakWidth, r.PeakWidth, r.Headroom, intList(r.Widths))
	fmt.Fprintf(&b, "so at each of those widths every worker owns the same number of buckets (%g each at %d workers) and no worker carries an extra bucket's load. ",
		c.BucketsPerWorkerAtPeak, r.PeakWidth)
	fmt.Fprintf(&b, "At most %d workers can ever own state; growing past that needs an offline `rebucket rewrite` to a larger count. ", c.Buckets)
	fmt.Fprintf(&b, "It divides evenly by %d widths in all (%s). ", len(c.Divisors), intList(c.Divisors))
	fmt.Fprintf(&b, "Bookkeeping: %d per-bucket stats entries, at least %d data files after a rewrite (cut for the widths up to %d by default), a manifest of about %s.",
		c.Buckets, c.Files, MaxDefaultCutWidth, units.Bytes(c.ManifestBytes))
	if len(r.Alternatives) > 0 {
		var alts []string
		for _, a := range r.Alternatives {
			alts = append(alts, fmt.Sprintf("%d (%d even widths, ~%s manifest)", a.Buckets, len(a.Divisors), units.Bytes(a.ManifestBytes)))
		}
		fmt.Fprintf(&b, " Counts that divide by more widths, at more bookkeeping: %s.", strings.Join(alts, ", "))
	}
	if c.Warn {
		fmt.Fprintf(&b, " Warning: %s.", BookkeepingWarning(c.Buckets))
	}
	return b.String()
}

func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func divisors(n int) []int {
	var lo, hi []int
	for d := 1; d*d <= n; d++ {
		if n%d == 0 {
			lo = append(lo, d)
			if d*d != n {
				hi = append(hi, n/d)
			}
		}
	}
	slices.Reverse(hi)
	return append(lo, hi...)
}

func numDivisors(n int) int {
	c := 0
	for d := 1; d*d <= n; d++ {
		if n%d == 0 {
			c += 2
			if d*d == n {
				c--
			}
		}
	}
	return c
}
