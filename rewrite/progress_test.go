package rewrite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// A shuffle reports both of its phases, the scan and the owners' merge
// and write, each labelled with its total, and each runs to its total.
func TestShuffleReportsEveryPhase(t *testing.T) {
	for _, tc := range []struct {
		name   string
		to     snapshotfmt.Partitioning
		phases []string
	}{
		{"one group", snapshotfmt.Partitioning{Buckets: 6, Mapping: snapshotfmt.MappingRange},
			[]string{"shuffle: read and sort", "shuffle: merge and write"}},
		{"two groups", snapshotfmt.Partitioning{Buckets: 6},
			[]string{"shuffle group 1/2: read and sort", "shuffle group 1/2: merge and write", "shuffle group 2/2: read and sort", "shuffle group 2/2: merge and write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			src := generate(t, tmp, fixtures.Spec{Buckets: 8, Keys: 500}, writer.Options{})
			rec := &progress.Recorder{}
			if _, err := Run(context.Background(), Options{Source: src, Target: filepath.Join(tmp, "dst"), To: tc.to, Progress: rec, Parallelism: 2}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range rec.Phases() {
				if !strings.HasPrefix(p.What, "shuffle") || !strings.Contains(p.What, ": ") {
					continue // the label of the whole run
				}
				got = append(got, p.What)
				if p.Total <= 0 || p.Done != p.Total || p.Unit != progress.Bytes || !p.Finished {
					t.Errorf("%s: %+v: want a finished phase that reached its total", p.What, p)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.phases, "|") {
				t.Errorf("phases %q, want %q", got, tc.phases)
			}
		})
	}
}
