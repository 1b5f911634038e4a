package reader_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

// Clipped tables keep the snapshot's choice between compression and none:
// every table of every built store, ingested whole or clipped, has the
// compression of the snapshot's files.
func TestBuildStoreKeepsCompression(t *testing.T) {
	for _, tc := range []struct{ comp, want string }{
		{"none", "NoCompression"},
		{"snappy", "Snappy"},
	} {
		t.Run(tc.comp, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			spec := fixtures.Spec{Buckets: 8, Width: 4, Keys: 400}
			if _, err := fixtures.Generate(context.Background(), dir, spec, writer.Options{FileSize: 8 << 10, Compression: tc.comp}); err != nil {
				t.Fatal(err)
			}
			s, err := reader.Open(dir, reader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.NewLoader(3, reader.PolicyReject)
			if err != nil {
				t.Fatal(err)
			}
			tables, clipped := 0, 0
			for i := range 3 {
				wd := filepath.Join(t.TempDir(), "w")
				st, err := l.BuildStore(context.Background(), i, wd)
				if err != nil {
					t.Fatal(err)
				}
				clipped += st.RewrittenFiles
				ents, _ := os.ReadDir(filepath.Join(wd, reader.StoreDir))
				for _, e := range ents {
					if !strings.HasSuffix(e.Name(), ".sst") {
						continue
					}
					tables++
					if got := tableCompression(t, filepath.Join(wd, reader.StoreDir, e.Name())); got != tc.want {
						t.Errorf("worker %d: %s is %s, want %s", i, e.Name(), got, tc.want)
					}
				}
			}
			if clipped == 0 || tables == 0 {
				t.Fatalf("%d tables, %d clipped: the test needs both", tables, clipped)
			}
		})
	}
}

func tableCompression(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	r, err := reader.OpenTable(context.Background(), f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	props, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return props.CompressionName
}
