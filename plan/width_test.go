package plan_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func TestCompactTableDesignExample(t *testing.T) {
	for _, tc := range []struct {
		w    int
		want []plan.RangeRow
	}{
		{2, []plan.RangeRow{{0, 1, 4, 0, 7}}},
		{4, []plan.RangeRow{{0, 3, 2, 0, 7}}},
		{3, []plan.RangeRow{{0, 1, 3, 0, 5}, {2, 2, 2, 6, 7}}},
		{12, []plan.RangeRow{{0, 1, 1, 0, 1}, {2, 2, 0, -1, -1}, {3, 4, 1, 2, 3}, {5, 5, 0, -1, -1}, {6, 7, 1, 4, 5}, {8, 8, 0, -1, -1}, {9, 10, 1, 6, 7}, {11, 11, 0, -1, -1}}},
	} {
		if got := plan.CompactTable(tc.w, 8); !slices.Equal(got, tc.want) {
			t.Errorf("W=%d: %+v, want %+v", tc.w, got, tc.want)
		}
	}
}

func TestSuggestBuckets(t *testing.T) {
	for _, tc := range []struct{ n, w, want int }{
		{8, 40, 160},     // lcm 40, at least 4*40
		{128, 200, 3200}, // lcm 3200 >= 800
		{8, 12, 48},
		{1024, 30000, 120832}, // lcm too large: smallest multiple of 1024 >= 4w, capped below
	} {
		got := plan.SuggestBuckets(tc.n, tc.w)
		if tc.want > snapshotfmt.MaxBuckets {
			if got%tc.n != 0 || got > snapshotfmt.MaxBuckets || got < tc.w {
				t.Errorf("SuggestBuckets(%d, %d) = %d", tc.n, tc.w, got)
			}
			continue
		}
		if got != tc.want || got%tc.n != 0 || got%tc.w != 0 {
			t.Errorf("SuggestBuckets(%d, %d) = %d, want %d", tc.n, tc.w, got, tc.want)
		}
	}
}

func TestForWidth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	m, err := fixtures.Generate(context.Background(), dir, fixtures.Spec{Buckets: 8, Width: 2, Keys: 200}, writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.ForWidth(m, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Feasible || p.Owners != 4 || len(p.Idle) != 0 || len(p.WaysOut) != 0 {
		t.Errorf("W=4: %+v", p)
	}
	var sum uint64
	for _, w := range p.Workers {
		sum += w.Entries
	}
	if sum != m.TotalEntries() {
		t.Errorf("workers hold %d entries, snapshot %d", sum, m.TotalEntries())
	}
	p, _ = plan.ForWidth(m, 12)
	if p.Feasible || p.Owners != 8 || !slices.Equal(p.Idle, []int{2, 5, 8, 11}) || p.SuggestedBuckets != 48 {
		t.Errorf("W=12: feasible %v owners %d idle %v suggested %d", p.Feasible, p.Owners, p.Idle, p.SuggestedBuckets)
	}
	joined := strings.Join(p.WaysOut, "\n")
	for _, want := range []string{"into 48 buckets", "import", "split", "--on-excess"} {
		if !strings.Contains(joined, want) {
			t.Errorf("ways out lack %q:\n%s", want, joined)
		}
	}
	// Given the path, the ways out are commands on it, no placeholders.
	joined = strings.Join(plan.WaysOut("my snap", 8, 12), "\n")
	for _, want := range []string{"`rebucket rewrite 'my snap' --buckets 48 --out 'my snap-48'`", "`rebucket import 'my snap.parquet' --buckets 48 --out 'my snap-48'`", "--by buckets=0-3`"} {
		if !strings.Contains(joined, want) {
			t.Errorf("ways out lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "SNAPSHOT") || strings.Contains(joined, "NEW") {
		t.Errorf("placeholders in the ways out:\n%s", joined)
	}
	if _, err := plan.ForWidth(m, 0); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Errorf("W=0: %v", err)
	}
}

// One rule: the count suggested to make room for w workers over n buckets
// is the count plan --recommend names for a peak of w with that snapshot.
func TestSuggestBucketsIsTheRecommendation(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, w := range []int{1, 2, 3, 7, 12, 40, 100, 200} {
			s := plan.SuggestBuckets(n, w)
			if s > snapshotfmt.WarnBuckets {
				continue
			}
			r, err := plan.RecommendFor(n, w, 0, nil)
			if err != nil {
				t.Fatalf("RecommendFor(%d, %d): %v", n, w, err)
			}
			if r.Recommended.Buckets != s {
				t.Errorf("n=%d w=%d: SuggestBuckets %d, RecommendFor %d", n, w, s, r.Recommended.Buckets)
			}
		}
	}
	// A snapshot whose count divides the peak adds no constraint.
	r, _ := plan.Recommend(40, 0, nil)
	for _, n := range []int{1, 4, 8, 40} {
		if s := plan.SuggestBuckets(n, 40); s != r.Recommended.Buckets {
			t.Errorf("n=%d: SuggestBuckets(n, 40) = %d, Recommend(40) = %d", n, s, r.Recommended.Buckets)
		}
	}
}

func TestRecommendPeak40(t *testing.T) {
	r, err := plan.Recommend(40, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Recommended.Buckets
	if c < 4*40 {
		t.Errorf("count %d has less than 4x headroom over 40", c)
	}
	for _, w := range []int{4, 8, 10, 20, 40} {
		if c%w != 0 {
			t.Errorf("count %d does not divide by %d", c, w)
		}
	}
	if c != 160 {
		t.Errorf("count %d, want the smallest such, 160", c)
	}
	if len(r.Alternatives) == 0 {
		t.Fatal("no alternatives")
	}
	prev := len(r.Recommended.Divisors)
	for _, a := range r.Alternatives {
		if a.Buckets%40 != 0 || len(a.Divisors) <= prev {
			t.Errorf("alternative %d: %d divisors after %d", a.Buckets, len(a.Divisors), prev)
		}
		prev = len(a.Divisors)
	}
	for _, want := range []string{"Bucket count: 160", "4 x 40 = 160", "divides evenly by every planned width", "4 each at 40 workers", "manifest"} {
		if !strings.Contains(r.Record, want) {
			t.Errorf("record lacks %q:\n%s", want, r.Record)
		}
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings at 160: %v", r.Warnings)
	}
}

func TestRecommendCases(t *testing.T) {
	for _, tc := range []struct {
		peak, headroom int
		widths         []int
		want           int
		warn           bool
		err            error
	}{
		{peak: 1, want: 4},
		{peak: 12, headroom: 2, want: 24},
		{peak: 40, widths: []int{3, 40}, want: 240},
		{peak: 10000, headroom: 4, want: 40000, warn: true},
		{peak: 20000, headroom: 4, err: snapshotfmt.ErrInvalidArgument},
		{peak: 0, err: snapshotfmt.ErrInvalidArgument},
		{peak: 4, widths: []int{0}, err: snapshotfmt.ErrInvalidArgument},
	} {
		r, err := plan.Recommend(tc.peak, tc.headroom, tc.widths)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%+v: %v, want %v", tc, err, tc.err)
			}
			continue
		}
		if err != nil || r.Recommended.Buckets != tc.want || (len(r.Warnings) > 0) != tc.warn {
			t.Errorf("%+v: %d warnings %v err %v", tc, r.Recommended.Buckets, r.Warnings, err)
		}
		if tc.warn && !strings.Contains(r.Record, "bookkeeping") {
			t.Errorf("warning not in record: %s", r.Record)
		}
	}
}

func TestTopKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.Spec{Buckets: 16, Width: 2, Keys: 300, SubKeys: 50, Skew: fixtures.Zipf}, writer.Options{FileSize: 16 << 10}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Exact per-key sums, computed the simple way.
	want := map[string]uint64{}
	it := s.NewIterAll(context.Background())
	for it.Next() {
		dk, _ := snapshotfmt.DecodeKey(it.Key())
		want[string(dk.Key)] += uint64(len(it.Key()) + len(it.Value()))
	}
	it.Close()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if want[a] != want[b] {
			if want[a] > want[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, par := range []int{1, 3} {
		h, err := plan.TopKeys(context.Background(), s, 5, par, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Top) != 5 || h.Scanned != s.Manifest().TotalEntries() {
			t.Fatalf("parallel %d: %d keys, scanned %d", par, len(h.Top), h.Scanned)
		}
		for i, hk := range h.Top {
			if hk.Key != keys[i] || hk.Bytes != want[keys[i]] {
				t.Errorf("parallel %d: #%d is %s (%d bytes), want %s (%d)", par, i, hk.Key, hk.Bytes, keys[i], want[keys[i]])
			}
			if b := s.Manifest().Partitioning.Bucket([]byte(hk.Key)); b != hk.Bucket {
				t.Errorf("%s: bucket %d, hashes to %d", hk.Key, hk.Bucket, b)
			}
			if hk.Share <= 0 || hk.Share > 1 {
				t.Errorf("%s: share %f", hk.Key, hk.Share)
			}
		}
		// Zipf: user 0 is far heavier than the rest and dominates its bucket.
		if len(h.Dominant) == 0 || h.Dominant[0].Key != string(fixtures.Key(0)) && !slices.ContainsFunc(h.Dominant, func(d plan.HotKey) bool { return d.Key == string(fixtures.Key(0)) }) {
			t.Errorf("parallel %d: dominant %+v, want %s among them", par, h.Dominant, fixtures.Key(0))
		}
		if len(h.DominanceWarnings()) != len(h.Dominant) {
			t.Error("warnings do not match dominant keys")
		}
	}
	if _, err := plan.TopKeys(context.Background(), s, 0, 1, nil); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Errorf("k=0: %v", err)
	}
}

// A manifest may declare a width of up to 1,048,576 workers over at most
// 65,536 buckets. Listing every idle worker made `inspect --json` of a
// 4 KB manifest take 846 MB and print 208 MB; above MaxListedWorkers the
// load lists the owners and gives idle workers as ranges.
func TestLoadAtHugeWidthIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	m, err := fixtures.Generate(context.Background(), dir, fixtures.Spec{Buckets: 8, Width: 2, Keys: 200}, writer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := plan.LoadAt(m, snapshotfmt.MaxWidth)
	if l.AllListed || len(l.Workers) != 8 || len(l.Idle) != 0 || l.IdleCount != snapshotfmt.MaxWidth-8 || len(l.IdleRanges) > 9 {
		t.Fatalf("W=%d: listed %v, %d workers, %d idle listed, %d idle, %d ranges", snapshotfmt.MaxWidth, l.AllListed, len(l.Workers), len(l.Idle), l.IdleCount, len(l.IdleRanges))
	}
	var sum uint64
	for _, w := range l.Workers {
		if !w.Owns {
			t.Fatalf("idle worker %d listed", w.Worker)
		}
		sum += w.Entries
	}
	if sum != m.TotalEntries() {
		t.Errorf("owners hold %d entries, snapshot %d", sum, m.TotalEntries())
	}
	// At a listed width the ranges say what the list says.
	l = plan.LoadAt(m, 12)
	if !l.AllListed || len(l.Workers) != 12 || l.IdleCount != 4 || plan.FormatRanges(l.IdleRanges, 16) != "2, 5, 8, 11" {
		t.Errorf("W=12: %+v, ranges %q", l, plan.FormatRanges(l.IdleRanges, 16))
	}
	if got := plan.FormatRanges([]plan.Range{{0, 3}, {5, 6}, {9, 9}}, 2); got != "0-3, 5, 6, ... (7 in all)" {
		t.Errorf("FormatRanges = %q", got)
	}
}

func TestCheckFileSize(t *testing.T) {
	for _, tc := range []struct {
		size, data int64
		ok         bool
	}{
		{1, 0, false},
		{plan.MinFileSize - 1, 0, false},
		{plan.MinFileSize, 0, true},
		{plan.MinFileSize, plan.MaxDataFiles * plan.MinFileSize, true},
		{plan.MinFileSize, (plan.MaxDataFiles + 1) * plan.MinFileSize, false},
		{128 << 20, 1 << 40, true},
	} {
		err := plan.CheckFileSize(tc.size, tc.data)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, snapshotfmt.ErrInvalidArgument)) {
			t.Errorf("CheckFileSize(%d, %d) = %v, want ok %v", tc.size, tc.data, err, tc.ok)
		}
	}
}
