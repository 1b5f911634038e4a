package reader_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// tableDamageWant is what every reader must say of each table damage:
// FORMAT.md allows only sets of decodable keys, and no range blocks.
var tableDamageWant = map[fixtures.Damage]string{
	fixtures.TombstoneEntry: "only sets",
	fixtures.RangeDeletion:  "range-deletion",
	fixtures.RangeKey:       "range-key",
	fixtures.UndecodableKey: "claims a 4294967295-byte key",
}

func damagedSnapshot(t *testing.T, d fixtures.Damage) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	if err := fixtures.ApplyTable(context.Background(), dir, d); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Tables that Pebble reads happily and whose manifest entry agrees with
// them, yet hold what a snapshot never holds: iteration refuses them.
func TestReaderTableDamage(t *testing.T) {
	for _, d := range fixtures.TableDamages {
		t.Run(string(d), func(t *testing.T) {
			_, err := readAll(damagedSnapshot(t, d))
			if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), tableDamageWant[d]) {
				t.Fatalf("error %v, want ErrCorrupt mentioning %q", err, tableDamageWant[d])
			}
			if !strings.Contains(err.Error(), "data/") {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}
