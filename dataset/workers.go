package dataset

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"

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
func writeWorkerStateTable(ctx context.Context, s *reader.Snapshot, path string, f Format, meta map[string]string) (uint64, error) {
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
	sk, err := newSink(path, sinkConfig{format: f, schema: WorkerStateSchema, meta: meta, rowGroupRows: DefaultRowGroupRows})
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
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
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

// redistribute deals per-worker items (one list per old worker) to width w
// by the state's rule (DESIGN section 3).
func redistribute(rule snapshotfmt.Rule, old [][][]byte, w int) [][][]byte {
	out := make([][][]byte, w)
	if len(old) == w {
		copy(out, old)
		return out
	}
	switch rule {
	case snapshotfmt.RuleSplit:
		i := 0
		for _, items := range old {
			for _, it := range items {
				out[i%w] = append(out[i%w], it)
				i++
			}
		}
	case snapshotfmt.RuleUnion:
		var all [][]byte
		for _, items := range old {
			all = append(all, items...)
		}
		for i := range out {
			out[i] = all
		}
	default: // broadcast: worker 0's copy
		var first [][]byte
		if len(old) > 0 {
			first = old[0]
		}
		for i := range out {
			out[i] = first
		}
	}
	return out
}
