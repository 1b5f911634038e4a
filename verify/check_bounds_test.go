package verify

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// A list state's value must be the item encoding (FORMAT.md section 5).
// The deep scan did not look inside values, so a list value with a length
// running past its end, or trailing bytes, verified.
func TestCheckDeepListEncoding(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	genDamageBase(t, src)
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := s.Manifest().StateByName("window/events")
	for _, tc := range []struct {
		name string
		edit func(v []byte) []byte
	}{
		{"trailing bytes", func(v []byte) []byte { return append(v, 0, 0) }},
		{"length past the end", func(v []byte) []byte { return append(v, 0, 0, 0, 9, 'x') }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			_, err := fixtures.Relayout(context.Background(), src, dst, fixtures.RelayoutSpec{
				Partitioning: s.Manifest().Partitioning,
				Edit: func(es []fixtures.Entry) []fixtures.Entry {
					for i := range es {
						if es[i].State == list.ID {
							es[i].Value = tc.edit(es[i].Value)
							break
						}
					}
					return es
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var fs []Finding
			sum, err := Check(context.Background(), dst, Options{Deep: DeepOn}, collect(&fs))
			if err != nil {
				t.Fatal(err)
			}
			if got := kindsOf(fs, SevError); !slices.Equal(got, []Kind{ListEncoding}) || sum.Verified {
				t.Fatalf("kinds %v, verified %v, want only %s: %v", got, sum.Verified, ListEncoding, fs)
			}
			if fs[0].State != "window/events" || fs[0].Key == "" {
				t.Errorf("finding does not name state and key: %+v", fs[0])
			}
		})
	}
}

// An I/O error reading a listed file is a failure of the run (Check
// returns it: exit 4), not a finding about the snapshot (exit 1), whether
// it hits the checksum pass, the table scan or a per-worker file.
func TestCheckReadFailureIsNotAFinding(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	genDamageBase(t, dir)
	for _, path := range []string{"/data/", "/workers/"} {
		for _, after := range []int{0, 1, 2, 3, 5} {
			t.Run(fmt.Sprintf("%s after %d", path, after), func(t *testing.T) {
				ffs := &fsx.Faulty{Fault: fsx.Fault{Op: fsx.OpRead, Path: path, Err: syscall.EIO, After: after}}
				var fs []Finding
				_, err := Check(context.Background(), dir, Options{Deep: DeepOn, FS: ffs, Parallelism: 1}, collect(&fs))
				if ffs.Hits.Load() == 0 {
					t.Skip("no read failed")
				}
				if !errors.Is(err, syscall.EIO) || errors.Is(err, snapshotfmt.ErrCorrupt) {
					t.Fatalf("Check returned %v, want the EIO", err)
				}
				for _, f := range fs {
					if f.Kind != FileUnreadable {
						t.Errorf("finding %s: %s (an I/O error is not damage)", f.Kind, f.Message)
					}
				}
			})
		}
	}
}
