package spark

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func isFormatErr(err error) bool {
	return errors.Is(err, snapshotfmt.ErrCorrupt) || errors.Is(err, snapshotfmt.ErrUnsupported)
}

func FuzzSchemaFile(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "real", "agg_str", "state", "0", "0", "_metadata", "schema"))
	f.Add(b)
	f.Add(schemaFileV2(GenKeySchema, GenValueSchema))
	f.Add([]byte("\x00\x02v1\x00\x02{}\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Store
		if err := parseSchemaFile(&s, b); err != nil {
			if !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
			return
		}
		for _, js := range []string{s.KeySchemaJSON, s.ValueSchemaJSON} {
			if _, err := unsaferow.ParseSchema([]byte(js)); err != nil && !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
		}
	})
}

func FuzzOffsets(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "real", "agg_str", "offsets", "2"))
	f.Add(b)
	f.Add([]byte("v2\n{\"conf\":{\"spark.sql.shuffle.partitions\":\"2\"}}\n0:{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseOffset(1, b)
		if err != nil {
			if !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
			return
		}
		if _, err := o.Partitions(); err != nil {
			return
		}
		out, err := o.WithPartitions(7)
		if err != nil {
			if !isFormatErr(err) {
				t.Fatalf("%v", err)
			}
			return
		}
		o2, err := parseOffset(1, out)
		if err != nil {
			t.Fatalf("rewritten entry does not parse: %v", err)
		}
		if n, _ := o2.Partitions(); n != 7 {
			t.Fatalf("rewritten entry says %d", n)
		}
	})
}
