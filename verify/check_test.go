package verify

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func genDamageBase(t testing.TB, dir string) {
	t.Helper()
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
}

func collect(fs *[]Finding) Sink { return func(f Finding) { *fs = append(*fs, f) } }

func kindsOf(fs []Finding, sev Severity) []Kind {
	set := map[Kind]bool{}
	for _, f := range fs {
		if f.Severity == sev {
			set[f.Kind] = true
		}
	}
	ks := slices.Collect(maps.Keys(set))
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func TestCheckSound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	genDamageBase(t, dir)
	var fs []Finding
	sum, err := Check(context.Background(), dir, Options{Width: 3}, collect(&fs))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 || !sum.Verified || !sum.Deep {
		t.Fatalf("sound snapshot: verified=%v deep=%v findings %v", sum.Verified, sum.Deep, fs)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Entries == 0 || sum.Entries != s.Manifest().TotalEntries() || sum.DataFiles < 3 || sum.Width == nil || !sum.Width.Loadable {
		t.Fatalf("summary %+v", sum)
	}
}

// expected lists, per damage, exactly the error kinds Check must report and
// the error class it returns (nil: it ran and reported findings).
var expected = map[fixtures.Damage]struct {
	kinds []Kind
	err   error
}{
	fixtures.MissingManifest:         {[]Kind{ManifestMissing}, snapshotfmt.ErrNotFound},
	fixtures.TruncatedManifest:       {[]Kind{ManifestTorn}, snapshotfmt.ErrCorrupt},
	fixtures.EditedManifest:          {[]Kind{ManifestChecksum}, snapshotfmt.ErrCorrupt},
	fixtures.ManifestPathEscape:      {[]Kind{ManifestInconsistent}, snapshotfmt.ErrCorrupt},
	fixtures.OverlappingRanges:       {[]Kind{ManifestInconsistent}, snapshotfmt.ErrCorrupt},
	fixtures.MissingDataFile:         {[]Kind{FileMissing}, nil},
	fixtures.WrongSize:               {[]Kind{FileSize}, nil},
	fixtures.WrongChecksum:           {[]Kind{FileChecksum}, nil},
	fixtures.FlippedByte:             {[]Kind{FileChecksum}, nil},
	fixtures.TruncatedTable:          {[]Kind{TableCorrupt}, nil},
	fixtures.WrongBucketEntry:        {[]Kind{WrongBucket}, nil},
	fixtures.DuplicateKeyAcrossFiles: {[]Kind{DuplicateKey, OutsideFileRange}, nil},
	fixtures.EntryOutsideRange:       {[]Kind{OutsideFileRange}, nil},
	fixtures.StatsDisagree:           {[]Kind{BucketStats}, nil},
	fixtures.MissingWorkerFile:       {[]Kind{FileMissing}, nil},
	fixtures.UnlistedFile:            {nil, nil},
}

func TestCheckDamage(t *testing.T) {
	for _, d := range fixtures.Damages {
		t.Run(string(d), func(t *testing.T) {
			want, ok := expected[d]
			if !ok {
				t.Fatalf("no expectation for %s", d)
			}
			dir := filepath.Join(t.TempDir(), "snap")
			genDamageBase(t, dir)
			if err := fixtures.Apply(context.Background(), dir, d); err != nil {
				t.Fatal(err)
			}
			var fs []Finding
			sum, err := Check(context.Background(), dir, Options{Deep: DeepOn}, collect(&fs))
			if want.err == nil && err != nil {
				t.Fatalf("Check could not run: %v", err)
			}
			if want.err != nil && !errors.Is(err, want.err) {
				t.Fatalf("Check error %v, want %v", err, want.err)
			}
			if got := kindsOf(fs, SevError); !slices.Equal(got, want.kinds) {
				t.Fatalf("error kinds %v, want %v; findings:\n%s", got, want.kinds, lines(fs))
			}
			if sum.Verified != (len(want.kinds) == 0) || sum.Errors < len(want.kinds) {
				t.Fatalf("verified=%v errors=%d", sum.Verified, sum.Errors)
			}
			for _, f := range fs {
				if f.Message == "" || f.String() == "" {
					t.Fatalf("empty message: %+v", f)
				}
			}
			switch d {
			case fixtures.MissingWorkerFile:
				if !strings.HasPrefix(fs[0].File, snapshotfmt.WorkersDir+"/") {
					t.Fatalf("missing worker file reported as %q", fs[0].File)
				}
			case fixtures.FlippedByte:
				// Caught by the whole-file checksum: the table was never
				// opened, so no table-level finding exists for it.
				if !strings.Contains(fs[0].Message, "not opened") {
					t.Fatalf("flipped byte: %s", fs[0])
				}
			case fixtures.UnlistedFile:
				if k := kindsOf(fs, SevWarning); !slices.Equal(k, []Kind{UnlistedFile}) {
					t.Fatalf("warnings %v", k)
				}
			case fixtures.WrongBucketEntry, fixtures.DuplicateKeyAcrossFiles:
				if fs[0].KeyText == "" || fs[0].State == "" || fs[0].Bucket < 0 {
					t.Fatalf("entry finding does not name its key: %+v", fs[0])
				}
			}
		})
	}
}

// The wrong-bucket entry has a correct checksum and consistent stats: only
// the deep scan can find it.
func TestWrongBucketNeedsDeep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	genDamageBase(t, dir)
	if err := fixtures.Apply(context.Background(), dir, fixtures.WrongBucketEntry); err != nil {
		t.Fatal(err)
	}
	var fs []Finding
	sum, err := Check(context.Background(), dir, Options{Deep: DeepOff}, collect(&fs))
	if err != nil || !sum.Verified || sum.Deep || len(fs) != 0 {
		t.Fatalf("shallow check: err=%v verified=%v findings %v", err, sum.Verified, fs)
	}
}

func TestCheckWidth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	genDamageBase(t, dir) // 8 buckets
	for _, tc := range []struct {
		w        int
		loadable bool
		idle     int
	}{{1, true, 0}, {8, true, 0}, {12, false, 4}} {
		var fs []Finding
		sum, err := Check(context.Background(), dir, Options{Width: tc.w, Deep: DeepOff}, collect(&fs))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Width.Loadable != tc.loadable || len(sum.Width.Idle) != tc.idle || sum.Verified != tc.loadable {
			t.Fatalf("width %d: %+v verified=%v", tc.w, sum.Width, sum.Verified)
		}
		if !tc.loadable && (len(fs) != 1 || fs[0].Kind != WidthAboveBuckets) {
			t.Fatalf("width %d: findings %v", tc.w, fs)
		}
	}
	if _, err := Check(context.Background(), dir, Options{Width: -1}, nil); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Fatalf("width -1: %v", err)
	}
}

func lines(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}
