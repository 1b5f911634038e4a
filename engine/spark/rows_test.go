package spark

import (
	"bytes"
	"context"
	"testing"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
)

// locate: a key typed by hand lands in the partition its stored row is in.
func TestEncodeKeyLocates(t *testing.T) {
	for _, name := range []string{"agg_str_int", "session", "join", "agg_long"} {
		c, err := Open(realDir(t, name))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = c.ForEachRow(context.Background(), func(r Row) error {
			vals, err := unsaferow.Decode(r.Store.KeySchema, r.Key)
			if err != nil {
				return err
			}
			text := map[string]string{}
			for _, i := range r.Store.KeyCols {
				text[r.Store.KeySchema.Fields[i].Name] = fmtValue(vals[i])
			}
			kb, sub, err := EncodeKey(r.Store, text)
			if err != nil {
				return err
			}
			p, err := sparkhash.Partition(sub, kb, nil, c.Partitions)
			if err != nil {
				return err
			}
			if p != r.Partition {
				t.Errorf("%s: key %v located in %d, stored in %d", name, text, p, r.Partition)
			}
			if len(r.Store.KeyCols) == len(r.Store.KeySchema.Fields) && !bytes.Equal(kb, r.Key) {
				t.Errorf("%s: re-encoded key %x != stored %x", name, kb, r.Key)
			}
			n++
			return nil
		})
		if err != nil || n == 0 {
			t.Fatalf("%s: %d rows, %v", name, n, err)
		}
	}
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	default:
		return fmtAny(x)
	}
}
