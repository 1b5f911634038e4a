package spark

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
)

// sharedCheckpoints holds the checkpoints interop/spark/make_checkpoints.py made
// by pyspark 4.3.0 with expected_state.jsonl (Spark's statestore reader:
// every row, its partition_id and Spark's hash of the partition key).
const sharedCheckpoints = "testdata/interop"

// TestSharedExpectedState decodes every row of those checkpoints and
// checks key, value, partition and hash against what Spark printed.
func TestSharedExpectedState(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(sharedCheckpoints, "*", "expected_state.jsonl"))
	if len(dirs) == 0 {
		t.Fatal("no checkpoints with expected_state.jsonl under " + sharedCheckpoints)
	}
	for _, exp := range dirs {
		base := filepath.Dir(exp)
		if strings.HasPrefix(filepath.Base(base), "tws") {
			continue // column families: TestTWSExpectedState
		}
		t.Run(filepath.Base(base), func(t *testing.T) {
			want := map[string]int{}
			f, err := os.Open(exp)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var r struct {
					Hash      int32          `json:"hash"`
					Key       map[string]any `json:"key"`
					Value     map[string]any `json:"value"`
					OpID      int            `json:"operatorId"`
					Store     string         `json:"store"`
					Partition int            `json:"partition_id"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				want[rowID(r.OpID, r.Store, r.Partition, r.Hash, r.Key)]++
			}
			c, err := Open(filepath.Join(base, "checkpoint"))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			err = c.ForEachRow(context.Background(), func(r Row) error {
				vals, err := unsaferow.Decode(r.Store.KeySchema, r.Key)
				if err != nil {
					return err
				}
				kr, _ := unsaferow.NewRow(r.Key, len(r.Store.KeySchema.Fields))
				h, err := sparkhash.HashRow(r.Store.KeySchema, kr, r.Store.KeyCols, sparkhash.Seed)
				if err != nil {
					return err
				}
				key := map[string]any{}
				for i, fld := range r.Store.KeySchema.Fields {
					key[fld.Name] = vals[i]
				}
				got[rowID(r.Operator.ID, r.Store.Name, r.Partition, h, key)]++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d distinct rows, Spark's reader %d", len(got), len(want))
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("row %s: %d here, %d in Spark's reader", k, got[k], n)
				}
			}
		})
	}
}

// rowID renders a row's identity with JSON-normalised key values.
func rowID(op int, store string, p int, h int32, key map[string]any) string {
	b, _ := json.Marshal(key)
	var norm map[string]any
	json.Unmarshal(b, &norm)
	names := make([]string, 0, len(norm))
	for n := range norm {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fmt.Sprintf("%d/%s/%d/%d", op, store, p, h)
	for _, n := range names {
		s += fmt.Sprintf("/%s=%v", n, norm[n])
	}
	return s
}
