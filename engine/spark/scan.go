package spark

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/progress"
)

// Progress receives progress of long work, in bytes of state files read; Add is
// called from several goroutines at once.
type Progress = progress.Reporter

// ScanOptions tune Inspect, Verify and Equal.
type ScanOptions struct {
	// Parallelism is the number of partitions loaded at once (default
	// GOMAXPROCS); each loaded partition is held in memory, as in Spark.
	Parallelism int
	// Memory bounds the partitions loaded at once (see RewriteOptions).
	Memory int64
	// CheckKeys rehashes every key and checks its partition (Verify).
	CheckKeys bool
	Progress  Progress
}

// Fingerprint is an order-independent digest of a multiset of rows: the
// count and the sums of the rows' 128-bit hashes.
type Fingerprint struct {
	Rows   uint64 `json:"rows"`
	Lo, Hi uint64 `json:"-"`
	Bytes  uint64 `json:"bytes"`
}

func (f *Fingerprint) add(key, value []byte) {
	// The 128-bit hash of the key seeded by its length, chained into the
	// value's: a digest of the (key, value) pair without building it.
	hk := xxh3.Hash128Seed(key, uint64(len(key)))
	hv := xxh3.Hash128Seed(value, hk.Lo^hk.Hi)
	h := xxh3.Uint128{Lo: hv.Lo ^ hk.Hi*0x9E3779B97F4A7C15, Hi: hv.Hi ^ hk.Lo}
	f.Rows++
	f.Lo += h.Lo
	f.Hi += h.Hi
	f.Bytes += uint64(len(key) + len(value))
}

// Merge adds another fingerprint.
func (f *Fingerprint) Merge(o Fingerprint) {
	f.Rows += o.Rows
	f.Lo += o.Lo
	f.Hi += o.Hi
	f.Bytes += o.Bytes
}

// Finding is one problem Verify found.
type Finding struct {
	Operator  int    `json:"operator"`
	Store     string `json:"store,omitempty"`
	Partition int    `json:"partition"`
	Problem   string `json:"problem"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("operator %d", f.Operator)
	if f.Store != "" {
		s += " store " + f.Store
	}
	if f.Partition >= 0 {
		s += " partition " + strconv.Itoa(f.Partition)
	}
	return s + ": " + f.Problem
}

const maxFindings = 100

type findings struct {
	mu    sync.Mutex
	list  []Finding
	total int
}

func (f *findings) add(x Finding) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total++
	if len(f.list) < maxFindings {
		f.list = append(f.list, x)
	}
}

// Report is what a full read of a checkpoint found.
type Report struct {
	Path          string            `json:"path"`
	QueryID       string            `json:"query_id"`
	LastCommitted int64             `json:"last_committed_batch"`
	Uncommitted   []int64           `json:"uncommitted_batches,omitempty"`
	StateVersion  int64             `json:"state_version"`
	Partitions    int               `json:"partitions"`
	Provider      string            `json:"provider"`
	Codec         string            `json:"codec"`
	Encoding      string            `json:"encoding"`
	OffsetLog     int               `json:"offset_log_version"`
	StateFormats  map[string]string `json:"state_format_versions,omitempty"`
	Operators     []OperatorReport  `json:"operators"`
	Rows          uint64            `json:"rows"`
	Findings      []Finding         `json:"findings"`
	FindingsTotal int               `json:"findings_total"`

	fp map[string]*Fingerprint
}

// OperatorReport describes one stateful operator.
type OperatorReport struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Unsupported string `json:"unsupported,omitempty"`
	// Inferred: no operator metadata (Spark < 3.5), Name from the layout.
	Inferred bool          `json:"inferred,omitempty"`
	Stores   []StoreReport `json:"stores"`
}

// StoreReport describes one store of an operator.
type StoreReport struct {
	Name        string          `json:"name"`
	KeySchema   string          `json:"key_schema"`
	ValueSchema string          `json:"value_schema"`
	PartitionBy []string        `json:"partition_key,omitempty"`
	Rows        uint64          `json:"rows"`
	Bytes       uint64          `json:"bytes"`
	Partitions  []PartitionLoad `json:"partitions"`
}

// PartitionLoad is one partition of a store at the committed version.
type PartitionLoad struct {
	Rows      uint64 `json:"rows"`
	Bytes     uint64 `json:"bytes"`      // key and value bytes
	FileBytes int64  `json:"file_bytes"` // compressed files read
	Files     int    `json:"files"`
	Missing   bool   `json:"missing,omitempty"`
}

func fpKey(op *Operator, s *Store) string { return strconv.Itoa(op.ID) + "/" + s.Name }

// Inspect reads every state row of the committed version and reports.
func Inspect(ctx context.Context, path string, opts ScanOptions) (*Report, error) {
	c, err := Open(path)
	if err != nil {
		return nil, err
	}
	return c.Scan(ctx, opts)
}

// Verify reads every partition of every store at the committed version,
// rehashes every key and reports findings: a key outside the partition
// Spark's rule puts it in, a missing partition directory, a partition
// directory beyond the recorded count holding state at the committed
// version, an operator rebucket cannot check. Damage that stops reading
// (a bad block, a missing delta) is an error wrapping snapshotfmt.ErrCorrupt.
func Verify(ctx context.Context, path string, opts ScanOptions) (*Report, error) {
	opts.CheckKeys = true
	return Inspect(ctx, path, opts)
}

// Scan reads the checkpoint's state at the committed version.
func (c *Checkpoint) Scan(ctx context.Context, opts ScanOptions) (*Report, error) {
	return c.scanAt(ctx, opts, c.StateVersion())
}

func (c *Checkpoint) scanAt(ctx context.Context, opts ScanOptions, version int64) (*Report, error) {
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	rep := &Report{
		Path: c.Dir, QueryID: c.QueryID, LastCommitted: c.LastCommitted, Uncommitted: c.Uncommitted(),
		StateVersion: version, Partitions: c.Partitions, Provider: c.Provider, Codec: c.Codec,
		Encoding: c.Offset.Conf(ConfEncoding), OffsetLog: c.Offset.Version,
		StateFormats: map[string]string{}, fp: map[string]*Fingerprint{},
	}
	if rep.Encoding == "" {
		rep.Encoding = "unsaferow"
	}
	for k, v := range c.Offset.Meta.Conf {
		if strings.HasSuffix(k, "stateFormatVersion") || strings.HasSuffix(k, "formatVersion") {
			rep.StateFormats[k] = v
		}
	}
	var fnd findings
	gate := newMemGate(opts.Memory)
	total := c.stateBytes(version)
	opts.Progress.Start(total, "reading Spark state")
	defer opts.Progress.Finish()
	for _, op := range c.Operators {
		or := OperatorReport{ID: op.ID, Name: op.Name, Unsupported: op.Unsupported, Inferred: op.Inferred}
		for _, s := range op.Stores {
			sr := StoreReport{Name: s.Name, Partitions: make([]PartitionLoad, c.Partitions)}
			if s.ValueSchema != nil {
				sr.ValueSchema = s.ValueSchema.String()
			} else {
				sr.ValueSchema = s.ValueSchemaJSON
			}
			if s.TWS != nil {
				sr.KeySchema = "column families keyed by " + s.TWS.Grouping.String()
				var names []string
				for _, cf := range s.TWS.Families {
					names = append(names, cf.Name)
				}
				sr.ValueSchema = "column families " + strings.Join(names, ", ")
				for _, f := range s.TWS.Grouping.Fields {
					sr.PartitionBy = append(sr.PartitionBy, f.Name)
				}
			} else if s.KeySchema != nil {
				sr.KeySchema = s.KeySchema.String()
				sr.PartitionBy = nil
				for _, i := range s.KeyCols {
					sr.PartitionBy = append(sr.PartitionBy, s.KeySchema.Fields[i].Name)
				}
			}
			if op.Unsupported != "" && opts.CheckKeys {
				fnd.add(Finding{op.ID, s.Name, -1, "cannot check key placement: rebucket does not support " + op.Unsupported + " yet"})
			}
			fp := &Fingerprint{}
			var mu sync.Mutex
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(opts.Parallelism)
			for p := 0; p < c.Partitions; p++ {
				g.Go(func() error {
					if err := gctx.Err(); err != nil {
						return err
					}
					dir := s.Dir(op.Dir, p)
					held, err := gate.acquire(gctx, c.layout.loadEstimate(dir, version))
					if err != nil {
						return err
					}
					defer gate.release(held)
					var local Fingerprint
					bad := 0
					files, size, err := c.layout.forEachRow(s, dir, version, func(k, v []byte) error {
						local.add(k, v)
						if !opts.CheckKeys || !s.hashable() {
							return nil
						}
						h, err := s.partitionHash(k)
						q := sparkhash.Pmod(h, c.Partitions)
						if err != nil {
							fnd.add(Finding{op.ID, s.Name, p, fmt.Sprintf("key %x: %v", k, err)})
						} else if q != p {
							if bad < 3 {
								fnd.add(Finding{op.ID, s.Name, p, fmt.Sprintf("key %s belongs in partition %d (pmod(murmur3, %d))", showKey(s, string(k)), q, c.Partitions)})
							} else {
								fnd.mu.Lock()
								fnd.total++
								fnd.mu.Unlock()
							}
							bad++
						}
						return nil
					})
					if errors.Is(err, fs.ErrNotExist) {
						sr.Partitions[p].Missing = true
						fnd.add(Finding{op.ID, s.Name, p, "partition directory " + dir + " is missing"})
						return nil
					}
					if err != nil {
						return fmt.Errorf("operator %d store %s partition %d: %w", op.ID, s.Name, p, err)
					}
					opts.Progress.Add(size)
					mu.Lock()
					sr.Partitions[p] = PartitionLoad{Rows: local.Rows, Bytes: local.Bytes, FileBytes: size, Files: files}
					fp.Merge(local)
					mu.Unlock()
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return nil, err
			}
			if opts.CheckKeys {
				c.checkExtraDirs(op, s, version, &fnd)
			}
			sr.Rows, sr.Bytes = fp.Rows, fp.Bytes
			rep.Rows += fp.Rows
			rep.fp[fpKey(op, s)] = fp
			or.Stores = append(or.Stores, sr)
		}
		rep.Operators = append(rep.Operators, or)
	}
	sort.Slice(fnd.list, func(i, j int) bool {
		a, b := fnd.list[i], fnd.list[j]
		if a.Operator != b.Operator {
			return a.Operator < b.Operator
		}
		return a.Partition < b.Partition
	})
	rep.Findings, rep.FindingsTotal = fnd.list, fnd.total
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

// checkExtraDirs flags partition directories at or beyond N that hold
// state at the committed version: Spark would ignore them, so their rows
// would be lost.
func (c *Checkpoint) checkExtraDirs(op *Operator, s *Store, version int64, fnd *findings) {
	for p := c.Partitions; ; p++ {
		dir := s.Dir(op.Dir, p)
		if _, err := os.Stat(dir); err != nil {
			return
		}
		if c.layout.hasVersion(dir, version) {
			fnd.add(Finding{op.ID, s.Name, p, fmt.Sprintf("partition directory beyond the recorded %d partitions holds state version %d, which Spark ignores", c.Partitions, version)})
		}
	}
}

// stateBytes sums the sizes of the files that make up version v.
func (c *Checkpoint) stateBytes(v int64) int64 {
	var total int64
	for _, op := range c.Operators {
		for _, s := range op.Stores {
			for p := 0; p < c.Partitions; p++ {
				files, err := c.layout.files(s.Dir(op.Dir, p), v)
				if err != nil {
					continue
				}
				for _, f := range files {
					if st, err := os.Stat(f); err == nil {
						total += st.Size()
					}
				}
			}
		}
	}
	return total
}

// showKey renders a key row for messages.
func showKey(s *Store, k string) string {
	if s.KeySchema == nil {
		return fmt.Sprintf("%x", k)
	}
	vals, err := decodeKey(s, k)
	if err != nil {
		return fmt.Sprintf("%x", k)
	}
	return vals
}

// EqualReport says whether two checkpoints hold the same state.
type EqualReport struct {
	Equal       bool     `json:"equal"`
	RowsA       uint64   `json:"rows_a"`
	RowsB       uint64   `json:"rows_b"`
	Differences []string `json:"differences"`
}

// Equal proves that two checkpoints hold the same rows (key and value
// bytes) per operator and store at their committed versions, whatever
// their partition counts, by order-independent fingerprints; operators'
// names and state schemas must agree too.
func Equal(ctx context.Context, a, b string, opts ScanOptions) (*EqualReport, error) {
	ca, err := Open(a)
	if err != nil {
		return nil, err
	}
	cb, err := Open(b)
	if err != nil {
		return nil, err
	}
	opts.CheckKeys = false
	ra, err := ca.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	rb, err := cb.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	return compareReports(ca, cb, ra, rb), nil
}

func compareReports(ca, cb *Checkpoint, ra, rb *Report) *EqualReport {
	rep := &EqualReport{RowsA: ra.Rows, RowsB: rb.Rows, Differences: []string{}}
	ops := map[int][2]*Operator{}
	for _, op := range ca.Operators {
		x := ops[op.ID]
		x[0] = op
		ops[op.ID] = x
	}
	for _, op := range cb.Operators {
		x := ops[op.ID]
		x[1] = op
		ops[op.ID] = x
	}
	ids := make([]int, 0, len(ops))
	for id := range ops {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		x := ops[id]
		if x[0] == nil || x[1] == nil {
			rep.Differences = append(rep.Differences, fmt.Sprintf("operator %d is in only one checkpoint", id))
			continue
		}
		if x[0].Name != x[1].Name {
			rep.Differences = append(rep.Differences, fmt.Sprintf("operator %d: %q vs %q", id, x[0].Name, x[1].Name))
		}
		stores := map[string][2]*Store{}
		for i := range 2 {
			for _, s := range x[i].Stores {
				y := stores[s.Name]
				y[i] = s
				stores[s.Name] = y
			}
		}
		names := make([]string, 0, len(stores))
		for n := range stores {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			y := stores[n]
			if y[0] == nil || y[1] == nil {
				rep.Differences = append(rep.Differences, fmt.Sprintf("operator %d store %s is in only one checkpoint", id, n))
				continue
			}
			if y[0].KeySchemaJSON != y[1].KeySchemaJSON || y[0].ValueSchemaJSON != y[1].ValueSchemaJSON {
				rep.Differences = append(rep.Differences, fmt.Sprintf("operator %d store %s: state schemas differ", id, n))
			}
			fa, fb := ra.fp[fpKey(x[0], y[0])], rb.fp[fpKey(x[1], y[1])]
			if *fa != *fb {
				rep.Differences = append(rep.Differences, fmt.Sprintf("operator %d store %s: rows differ (%d rows vs %d)", id, n, fa.Rows, fb.Rows))
			}
		}
	}
	rep.Equal = len(rep.Differences) == 0
	return rep
}
