package spark

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/snapshotfmt"
)

var twsCheckpoints = []string{"tws", "tws_rocksdb_changelog"}

// Spark's statestore reader (expected_state.jsonl, one "store" per state
// variable, $timers for the timers) against what rebucket finds in the
// column families: the rows of each family, and for every stored key the
// grouping key's hash equal to Spark's hash() of that key.
func TestTWSExpectedState(t *testing.T) {
	// the families the reader's state variables are kept in
	family := map[string]string{"count": "count", "recent": "recent", "seen": "seen", "$timers": "$procTimers_keyToTimestamp"}
	for _, name := range twsCheckpoints {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(sharedCheckpoints, name, "expected_state.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rowsPerFamily := map[string]int{}
			keysPerFamily := map[string]map[string]bool{}
			hashOf := map[string]int32{}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var r struct {
					Hash      int32             `json:"hash"`
					Key       map[string]string `json:"key"`
					Store     string            `json:"store"`
					Partition int               `json:"partition_id"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				cf := family[r.Store]
				rowsPerFamily[cf]++
				if keysPerFamily[cf] == nil {
					keysPerFamily[cf] = map[string]bool{}
				}
				keysPerFamily[cf][r.Key["k"]] = true
				hashOf[r.Key["k"]] = r.Hash
				if sparkhash.Pmod(r.Hash, 2) != r.Partition {
					t.Fatalf("Spark's own row %+v is not in pmod(hash, 2)", r)
				}
			}
			c, err := Open(filepath.Join(sharedCheckpoints, name, "checkpoint"))
			if err != nil {
				t.Fatal(err)
			}
			s := c.Operators[0].Stores[0]
			if s.TWS == nil || len(s.TWS.Families) != 7 || s.TWS.Grouping.String() != "struct<k:string>" {
				t.Fatalf("store %+v", s)
			}
			sparkHashes := map[int32]bool{}
			for _, h := range hashOf {
				sparkHashes[h] = true
			}
			got := map[string]int{}
			err = c.ForEachRow(context.Background(), func(r Row) error {
				cf := r.Store.TWS.byID[binary.LittleEndian.Uint16(r.Key)]
				got[cf.Name]++
				h, err := r.Store.partitionHash(r.Key)
				if err != nil {
					return err
				}
				if sparkhash.Pmod(h, 2) != r.Partition {
					t.Errorf("%s: a key in partition %d hashes to %d", cf.Name, r.Partition, sparkhash.Pmod(h, 2))
				}
				// the grouping key found in every family is one Spark printed
				if !sparkHashes[h] {
					t.Errorf("%s: key %x hashes to %d, no grouping key of Spark's has that hash", cf.Name, r.Key, h)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, cf := range []string{"count", "seen", "$procTimers_keyToTimestamp"} {
				if got[cf] != rowsPerFamily[cf] {
					t.Errorf("family %s: %d rows, Spark's reader %d", cf, got[cf], rowsPerFamily[cf])
				}
			}
			// A list is one stored value per grouping key; the reader shows
			// its elements.
			if got["recent"] != len(keysPerFamily["recent"]) {
				t.Errorf("list family: %d keys, Spark's reader %d", got["recent"], len(keysPerFamily["recent"]))
			}
			// The timer index, the TTL index and the list's row counter hold
			// a row per grouping key (per timer) too.
			for _, cf := range []string{"$procTimers_timestampToKey", "$ttl_count", "$rowCounter_recent"} {
				if got[cf] != len(keysPerFamily["count"]) {
					t.Errorf("family %s: %d rows, want one per grouping key (%d)", cf, got[cf], len(keysPerFamily["count"]))
				}
			}
		})
	}
}

// Rewriting keeps every row, writes v2 changelogs, an empty snapshot with
// the family ids in new partitions, and v2 operator metadata with M
// partitions naming the copy's own schema file.
func TestTWSRewrite(t *testing.T) {
	ctx := context.Background()
	for _, name := range twsCheckpoints {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(sharedCheckpoints, name, "checkpoint")
			prev, prevM := src, 2
			for i, m := range []int{8, 3, 2} {
				dst := filepath.Join(t.TempDir(), itoa(i))
				res, err := Rewrite(ctx, prev, dst, RewriteOptions{Partitions: m})
				if err != nil {
					t.Fatalf("to %d: %v", m, err)
				}
				raw, err := os.ReadFile(filepath.Join(dst, "state", "0", "_metadata", "v2", itoa(int(res.NewBatch))))
				if err != nil {
					t.Fatal(err)
				}
				abs, _ := filepath.Abs(dst)
				if !strings.Contains(string(raw), `"numPartitions":`+itoa(m)) || !strings.Contains(string(raw), `"file:`+abs+`/state/0/_stateSchema/default/`) {
					t.Fatalf("to %d: v2 metadata %s", m, raw)
				}
				nc, err := Open(dst)
				if err != nil {
					t.Fatal(err)
				}
				if nc.Operators[0].MetadataPath != filepath.Join(dst, "state", "0", "_metadata", "v2", itoa(int(res.NewBatch))) {
					t.Fatalf("the copy reads %s", nc.Operators[0].MetadataPath)
				}
				v := res.StateVersion
				cl := filepath.Join(dst, "state", "0", "0", itoa(int(v))+".changelog")
				if err := readChangelog(cl, func(op changeOp, k, val []byte) error { return nil }); err != nil {
					t.Fatal(err)
				}
				if m > prevM { // partition m-1 is new
					meta, err := ReadRocksZip(filepath.Join(dst, "state", "0", itoa(m-1), itoa(int(v-1))+".zip"))
					if err != nil || len(meta.ColumnFamilyMapping) != 8 {
						t.Fatalf("to %d: empty snapshot of a new partition: %+v %v", m, meta, err)
					}
				}
				if eq, err := Equal(ctx, src, dst, ScanOptions{}); err != nil || !eq.Equal {
					t.Fatalf("to %d: %+v %v", m, eq, err)
				}
				prev, prevM = dst, m
			}
		})
	}
}

func TestTWSNegative(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, ck string)
		want   error
		msg    string
	}{
		{"schema file missing", func(t *testing.T, ck string) {
			os.RemoveAll(filepath.Join(ck, "state/0/_stateSchema"))
		}, snapshotfmt.ErrCorrupt, "state schema file"},
		{"schema file damaged", func(t *testing.T, ck string) {
			ents, _ := filepath.Glob(filepath.Join(ck, "state/0/_stateSchema/default/*"))
			for _, e := range ents {
				if !strings.HasPrefix(filepath.Base(e), ".") {
					editFile(t, e, func(s string) string { return s[:len(s)/2] })
				}
			}
		}, snapshotfmt.ErrCorrupt, "state schema file"},
		{"unknown family id", func(t *testing.T, ck string) {
			// a put into family id 99
			var rec []byte
			rec = appendChangeV2(rec, []byte{99, 0, 0, 1, 2, 3}, []byte{0}, false)
			w, err := changelogFormat{append: appendChangeV2, header: changelogV2Header, end: []byte{recEOF}}.create(filepath.Join(ck, "state/0/0/3.changelog.new"))
			if err != nil {
				t.Fatal(err)
			}
			w.write(rec)
			w.finish()
			os.Rename(filepath.Join(ck, "state/0/0/3.changelog.new"), filepath.Join(ck, "state/0/0/3.changelog"))
		}, snapshotfmt.ErrCorrupt, "column family id 99"},
		{"changelog v3", func(t *testing.T, ck string) {
			w, err := changelogFormat{append: appendChangeV2, header: []byte{0, 2, 'v', '3'}, end: []byte{recEOF}}.create(filepath.Join(ck, "state/0/1/3.changelog.new"))
			if err != nil {
				t.Fatal(err)
			}
			w.finish()
			os.Rename(filepath.Join(ck, "state/0/1/3.changelog.new"), filepath.Join(ck, "state/0/1/3.changelog"))
		}, snapshotfmt.ErrUnsupported, "changelog version v3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ck := copyInterop(t, "tws_rocksdb_changelog")
			tc.damage(t, ck)
			err := rewriteErr(t, ck)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}
