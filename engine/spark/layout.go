package spark

import (
	"fmt"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// hashable says whether rebucket knows what s's rows are partitioned by.
func (s *Store) hashable() bool { return s.TWS != nil || s.KeyCols != nil }

// partitionHash is Spark's Murmur3 (seed 42) of the partition key of a
// key row of s, as the store holds it.
func (s *Store) partitionHash(k []byte) (int32, error) {
	if s.TWS != nil {
		return s.TWS.hash(k)
	}
	if s.KeyCols == nil {
		return 0, fmt.Errorf("%w: no partition key known for store %s", snapshotfmt.ErrUnsupported, s.Name)
	}
	r, err := unsaferow.NewRow(k, len(s.KeySchema.Fields))
	if err != nil {
		return 0, err
	}
	return sparkhash.HashRow(s.KeySchema, r, s.KeyCols, sparkhash.Seed)
}

// stateLayout is how one state store provider keeps a store partition's
// versions on disk. The rest of the package (scan, verify, rewrite, rows)
// sees rows as UnsafeRow key and value bytes, whatever the provider, so
// two checkpoints of the same query compare equal across providers.
type stateLayout interface {
	// files are the files that make up version v of the store partition
	// dir (fs.ErrNotExist when dir is missing; ErrCorrupt when a file the
	// version needs is missing).
	files(dir string, v int64) ([]string, error)
	// forEachRow calls fn for every row of version v of store s; the
	// slices are valid during the call. It returns the files and bytes
	// read.
	forEachRow(s *Store, dir string, v int64, fn func(key, value []byte) error) (files int, size int64, err error)
	// loadEstimate is the memory loading version v takes (0: streamed).
	loadEstimate(dir string, v int64) int64
	// hasVersion says whether dir holds a file of exactly version v.
	hasVersion(dir string, v int64) bool
}

// hdfsLayout is the HDFS-backed provider's: <v>.snapshot and <v>.delta.
type hdfsLayout struct{}

func (hdfsLayout) files(dir string, v int64) ([]string, error) {
	pf, err := ListPartition(dir)
	if err != nil {
		return nil, err
	}
	snap, deltas, err := pf.Plan(v)
	if err != nil {
		return nil, err
	}
	if snap != "" {
		deltas = append([]string{snap}, deltas...)
	}
	return deltas, nil
}

func (hdfsLayout) forEachRow(_ *Store, dir string, v int64, fn func(key, value []byte) error) (int, int64, error) {
	return ForEachRow(dir, v, fn)
}

func (hdfsLayout) loadEstimate(dir string, v int64) int64 { return loadEstimate(dir, v) }

func (hdfsLayout) hasVersion(dir string, v int64) bool {
	pf, err := ListPartition(dir)
	return err == nil && (pf.Snapshots[v] || pf.Deltas[v])
}
