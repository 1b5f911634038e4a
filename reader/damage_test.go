package reader_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// readAll opens the snapshot, iterates every entry and reads every
// per-worker file, returning the first error.
func readAll(dir string) (int, error) {
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return 0, err
	}
	n := 0
	it := s.NewIterAll(context.Background())
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		it.Close()
		return n, err
	}
	if err := it.Close(); err != nil {
		return n, err
	}
	for _, ws := range s.Manifest().WorkerStates {
		for _, wf := range ws.Files {
			if _, err := s.ReadWorkerFile(wf); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// The reader refuses the same damage verify reports, with an error of the
// right class, except what only verify's deep scan looks for: the reader
// does not recount the per-bucket stats (it does rehash every key).
func TestReaderDamage(t *testing.T) {
	for _, tc := range []struct {
		damage fixtures.Damage
		want   error  // nil: the reader does not notice
		msg    string // a word the message must contain
	}{
		{fixtures.MissingManifest, snapshotfmt.ErrNotFound, "MANIFEST.json"},
		{fixtures.TruncatedManifest, snapshotfmt.ErrCorrupt, "JSON"},
		{fixtures.EditedManifest, snapshotfmt.ErrCorrupt, "self-checksum"},
		{fixtures.ManifestPathEscape, snapshotfmt.ErrCorrupt, "../x.sst"},
		{fixtures.OverlappingRanges, snapshotfmt.ErrCorrupt, "overlaps"},
		{fixtures.MissingDataFile, snapshotfmt.ErrCorrupt, "missing"},
		{fixtures.WrongSize, snapshotfmt.ErrCorrupt, "bytes"},
		{fixtures.WrongChecksum, snapshotfmt.ErrCorrupt, "checksum"},
		{fixtures.FlippedByte, snapshotfmt.ErrCorrupt, "checksum"},
		{fixtures.TruncatedTable, snapshotfmt.ErrCorrupt, ""},
		{fixtures.DuplicateKeyAcrossFiles, snapshotfmt.ErrCorrupt, "outside"},
		{fixtures.EntryOutsideRange, snapshotfmt.ErrCorrupt, "outside"},
		{fixtures.MissingWorkerFile, snapshotfmt.ErrCorrupt, "missing"},
		{fixtures.WrongBucketEntry, snapshotfmt.ErrCorrupt, "hashes to bucket"},
		{fixtures.StatsDisagree, nil, ""},
		{fixtures.UnlistedFile, nil, ""},
	} {
		t.Run(string(tc.damage), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
				t.Fatal(err)
			}
			if err := fixtures.Apply(context.Background(), dir, tc.damage); err != nil {
				t.Fatal(err)
			}
			_, err := readAll(dir)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("reader failed on damage it does not check: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

// A flipped byte is caught by the whole-file checksum in OpenListed, the
// step before Pebble opens the table.
func TestFlippedByteCaughtBeforePebble(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	if err := fixtures.Apply(context.Background(), dir, fixtures.FlippedByte); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	df := s.Manifest().Files[0]
	if _, err := s.OpenListed(df.Path, df.Size, df.Checksum); !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("OpenListed: %v", err)
	}
	// Skipping the checksum hands the damaged table to Pebble: its own
	// block checksum must then fail, never a panic or wrong data silently.
	raw, err := reader.Open(dir, reader.Options{SkipChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := raw.OpenFile(context.Background(), df, nil, nil)
	if err == nil {
		for fi.Next() {
		}
		err = fi.Err()
		fi.Close()
	}
	if !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("unchecked damaged table read without error: %v", err)
	}
}
