package dataset

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/rebucket/rebucket/internal/fsx"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// WorkerStateSchema is the table per-worker state is exported as: one row
// per item, in manifest order of the states, then worker, then item.
var WorkerStateSchema = arrow.NewSchema([]arrow.Field{
	{Name: WColStep, Type: arrow.BinaryTypes.String},
	{Name: WColName, Type: arrow.BinaryTypes.String},
	{Name: WColRule, Type: arrow.BinaryTypes.String},
	{Name: WColWorker, Type: arrow.PrimitiveTypes.Int32},
	{Name: WColItem, Type: arrow.PrimitiveTypes.Int32},
	{Name: WColValue, Type: arrow.BinaryTypes.Binary},
}, nil)

// writeWorkerStateTable writes every per-worker state of s to path.
func writeWorkerStateTable(ctx context.Context, s *reader.Snapshot, path string, f Format, compression string, meta map[string]string) (uint64, error) {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, WorkerStateSchema)
	defer b.Release()
	var n uint64
	for _, ws := range s.Manifest().WorkerStates {
		for _, wf := range ws.Files {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			items, err := s.ReadWorkerFile(wf)
			if err != nil {
				return 0, err
			}
			for i, it := range items {
				b.Field(0).(*array.StringBuilder).Append(ws.Step)
				b.Field(1).(*array.StringBuilder).Append(ws.Name)
				b.Field(2).(*array.StringBuilder).Append(string(ws.Rule))
				b.Field(3).(*array.Int32Builder).Append(int32(wf.Worker))
				b.Field(4).(*array.Int32Builder).Append(int32(i))
				b.Field(5).(*array.BinaryBuilder).Append(it)
				n++
			}
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	if f == JSONL {
		return n, writeWorkerJSONL(path, rec)
	}
	sk, err := newSink(path, sinkConfig{format: f, schema: WorkerStateSchema, compression: compression, meta: meta, rowGroupRows: DefaultRowGroupRows})
	if err != nil {
		return 0, err
	}
	if err := sk.write(rec, 0, rec.NumRows()); err != nil {
		sk.abort()
		return 0, err
	}
	return n, sk.close()
}

func writeWorkerJSONL(path string, rec arrow.Record) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fsx.FilePerm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	bw := bufio.NewWriter(f)
	str := func(i int) *array.String { return rec.Column(i).(*array.String) }
	for r := 0; r < int(rec.NumRows()); r++ {
		l := []byte(`{"step":`)
		l = appendJSONString(l, str(0).Value(r))
		l = append(l, `,"name":`...)
		l = appendJSONString(l, str(1).Value(r))
		l = append(l, `,"rule":`...)
		l = appendJSONString(l, str(2).Value(r))
		l = append(l, `,"worker":`...)
		l = strconv.AppendInt(l, int64(rec.Column(3).(*array.Int32).Value(r)), 10)
		l = append(l, `,"item":`...)
		l = strconv.AppendInt(l, int64(rec.Column(4).(*array.Int32).Value(r)), 10)
		l = append(l, `,"value_base64":"`...)
		l = base64.StdEncoding.AppendEncode(l, rec.Column(5).(*array.Binary).Value(r))
		l = append(l, "\"}\n"...)
		if _, err := bw.Write(l); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncClose(f)
}

// workerStateIn is one per-worker state read from a table.
type workerStateIn struct {
	step, name string
	rule       snapshotfmt.Rule
	workers    [][][]byte // per old worker, items in order
	// fixed: listed by the export's metadata, whose width and rule are
	// authoritative (a worker past the width, or an item index gap, is
	// damage, not a reason to re-deal the items).
	fixed bool
}

// readWorkerStates reads a per-worker state table (Parquet or Arrow IPC).
// exp, when the export's metadata gave it, fixes the order, rules and old
// width so that workers without items and states without any survive, and
// is checked, not trusted: a row of a state, rule or worker it does not
// list, item indices that are not 0..n-1 per worker, or (from the source
// manifest) another item count per worker is ErrCorrupt.
func readWorkerStates(ctx context.Context, path string, exp *workerExpect) ([]workerStateIn, error) {
	p, err := openPart(path)
	if err != nil {
		return nil, fmt.Errorf("per-worker state: %w", err)
	}
	defer p.close()
	var bad []string
	cols := p.columns()
	for _, c := range []struct{ name, class string }{
		{WColStep, classString}, {WColName, classString}, {WColRule, classString},
		{WColWorker, classInt}, {WColItem, classInt}, {WColValue, classBinary},
	} {
		ci, ok := cols[c.name]
		switch {
		case !ok:
			bad = append(bad, "missing column "+c.name)
		case ci.class != c.class && !(c.class == classString && ci.class == classBinary):
			bad = append(bad, fmt.Sprintf("column %s is %s, want %s", c.name, ci.desc, c.class))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: per-worker state table %s: %s (want step, name, rule, worker, item, value)", snapshotfmt.ErrInvalidArgument, path, strings.Join(bad, "; "))
	}
	type item struct {
		worker, idx int64
		v           []byte
	}
	byName := map[string]*workerStateIn{}
	items := map[string][]item{}
	var order []string
	// own: the table is the one the export's metadata names, so it holds
	// exactly the states the metadata lists.
	own := exp != nil && exp.own
	if exp != nil {
		for _, m := range exp.meta {
			q := m.Step + "/" + m.Name
			byName[q] = &workerStateIn{step: m.Step, name: m.Name, rule: m.Rule, workers: make([][][]byte, m.Width), fixed: true}
			order = append(order, q)
		}
	}
	row := 0
	err = p.scan(ctx, []string{WColStep, WColName, WColRule, WColWorker, WColItem, WColValue}, func(cs []cell) error {
		row++
		for _, c := range cs {
			if c.null {
				return fmt.Errorf("%w: per-worker state %s row %d has a null", snapshotfmt.ErrInvalidArgument, path, row)
			}
		}
		step, name, rule := string(cs[0].b), string(cs[1].b), snapshotfmt.Rule(cs[2].b)
		switch rule {
		case snapshotfmt.RuleSplit, snapshotfmt.RuleUnion, snapshotfmt.RuleBroadcast:
		default:
			return fmt.Errorf("%w: per-worker state %s row %d: rule %q, want split, union or broadcast", snapshotfmt.ErrInvalidArgument, path, row, clip(string(rule)))
		}
		if step == "" || name == "" || strings.Contains(step, "/") {
			return fmt.Errorf("%w: per-worker state %s row %d: step %q and name %q must be non-empty", snapshotfmt.ErrInvalidArgument, path, row, clip(step), clip(name))
		}
		if cs[3].i < 0 || cs[3].i >= snapshotfmt.MaxBuckets*16 {
			return fmt.Errorf("%w: per-worker state %s row %d: worker %d", snapshotfmt.ErrInvalidArgument, path, row, cs[3].i)
		}
		if cs[4].i < 0 {
			return fmt.Errorf("%w: per-worker state %s row %d: item index %d", snapshotfmt.ErrInvalidArgument, path, row, cs[4].i)
		}
		q := step + "/" + name
		ws := byName[q]
		if ws == nil {
			if own {
				return fmt.Errorf("%w: per-worker state %s row %d: state %s is not among the export's per-worker states", snapshotfmt.ErrCorrupt, path, row, q)
			}
			if len(order) >= 1<<16-1 {
				return fmt.Errorf("%w: per-worker state %s: more than 65535 states", snapshotfmt.ErrTooLarge, path)
			}
			ws = &workerStateIn{step: step, name: name, rule: rule}
			byName[q] = ws
			order = append(order, q)
		}
		if ws.rule != rule {
			return fmt.Errorf("%w: per-worker state %s: %s has rules %s and %s", snapshotfmt.ErrInvalidArgument, path, q, ws.rule, rule)
		}
		if ws.fixed && cs[3].i >= int64(len(ws.workers)) {
			return fmt.Errorf("%w: per-worker state %s row %d: worker %d of %s, but the export's width is %d", snapshotfmt.ErrCorrupt, path, row, cs[3].i, q, len(ws.workers))
		}
		items[q] = append(items[q], item{cs[3].i, cs[4].i, append([]byte(nil), cs[5].b...)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []workerStateIn
	for k, q := range order {
		ws := byName[q]
		its := items[q]
		sort.SliceStable(its, func(i, j int) bool {
			if its[i].worker != its[j].worker {
				return its[i].worker < its[j].worker
			}
			return its[i].idx < its[j].idx
		})
		for i, it := range its {
			// Item indices give the order: two items at one index have
			// none, and (for an export's table) a gap is a lost item.
			if i > 0 && its[i-1].worker == it.worker && its[i-1].idx == it.idx {
				return nil, fmt.Errorf("%w: per-worker state %s: %s worker %d has two items at index %d", snapshotfmt.ErrInvalidArgument, path, q, it.worker, it.idx)
			}
			for int64(len(ws.workers)) <= it.worker {
				ws.workers = append(ws.workers, nil)
			}
			if ws.fixed && it.idx != int64(len(ws.workers[it.worker])) {
				return nil, fmt.Errorf("%w: per-worker state %s: %s worker %d has item %d where item %d belongs (items lost or reordered)", snapshotfmt.ErrCorrupt, path, q, it.worker, it.idx, len(ws.workers[it.worker]))
			}
			ws.workers[it.worker] = append(ws.workers[it.worker], it.v)
		}
		if exp != nil && exp.manifest != nil && k < len(exp.manifest.WorkerStates) {
			for w, f := range exp.manifest.WorkerStates[k].Files {
				if w < len(ws.workers) && uint64(len(ws.workers[w])) != f.Items {
					return nil, fmt.Errorf("%w: per-worker state %s: %s worker %d has %d items, the source manifest says %d", snapshotfmt.ErrCorrupt, path, q, w, len(ws.workers[w]), f.Items)
				}
			}
		}
		if len(ws.workers) == 0 {
			ws.workers = make([][][]byte, 1)
		}
		out = append(out, *ws)
	}
	return out, nil
}
