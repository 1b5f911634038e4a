package spark

// stateLayout is how one state store provider keeps a store partition's
// versions on disk. The rest of the package (scan, verify, rewrite, rows)
// sees rows as UnsafeRow key and value bytes, whatever the provider, so
// two checkpoints of the same query compare equal across providers.
type stateLayout interface {
	// files are the files that make up version v of the store partition
	// dir (fs.ErrNotExist when dir is missing; ErrCorrupt when a file the
	// version needs is missing).
	files(dir string, v int64) ([]string, error)
	// forEachRow calls fn for every row of version v; the slices are valid
	// during the call. It returns the files and bytes read.
	forEachRow(dir string, v int64, fn func(key, value []byte) error) (files int, size int64, err error)
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

func (hdfsLayout) forEachRow(dir string, v int64, fn func(key, value []byte) error) (int, int64, error) {
	return ForEachRow(dir, v, fn)
}

func (hdfsLayout) loadEstimate(dir string, v int64) int64 { return loadEstimate(dir, v) }

func (hdfsLayout) hasVersion(dir string, v int64) bool {
	pf, err := ListPartition(dir)
	return err == nil && (pf.Snapshots[v] || pf.Deltas[v])
}
