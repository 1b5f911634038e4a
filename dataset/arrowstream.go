package dataset

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow/go/v17/arrow/ipc"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// arrowStreamPart reads the Arrow IPC stream format (what pyarrow's
// new_stream and many Arrow tools write, .arrows): a schema message and
// record batches without the file format's footer. Its rows are declared by
// the batches' headers, known after the scan.
type arrowStreamPart struct {
	f       *os.File
	cols    map[string]colInfo
	md      map[string]string
	rows    int64
	scanned bool
}

// isArrowStream: a stream starts with an encapsulated message, the
// continuation marker 0xFFFFFFFF then its metadata length.
func isArrowStream(head []byte) bool {
	return len(head) >= 8 && head[0] == 0xff && head[1] == 0xff && head[2] == 0xff && head[3] == 0xff
}

func openArrowStream(f *os.File) (ap *arrowStreamPart, err error) {
	defer corrupt("arrow stream schema", &err)
	r, err := newStreamReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	ap = &arrowStreamPart{f: f, cols: map[string]colInfo{}, md: r.Schema().Metadata().ToMap()}
	for _, fl := range r.Schema().Fields() {
		ap.cols[fl.Name] = arrowColInfo(fl.Type)
	}
	return ap, nil
}

func newStreamReader(f *os.File) (*ipc.Reader, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek %s: %w", f.Name(), err)
	}
	r, err := ipc.NewReader(f, ipc.WithAllocator(&limitAllocator{max: maxArrowLive}))
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable Arrow IPC stream (truncated or damaged?): %v", snapshotfmt.ErrCorrupt, err)
	}
	return r, nil
}

func (a *arrowStreamPart) path() string                { return a.f.Name() }
func (a *arrowStreamPart) columns() map[string]colInfo { return a.cols }
func (a *arrowStreamPart) meta() map[string]string     { return a.md }
func (a *arrowStreamPart) close()                      { a.f.Close() }
func (a *arrowStreamPart) declared() int64             { return a.rows }

func (a *arrowStreamPart) scan(ctx context.Context, cols []string, fn func([]cell) error) (err error) {
	defer corrupt(a.f.Name(), &err)
	r, err := newStreamReader(a.f)
	if err != nil {
		return err
	}
	defer r.Release()
	idx := make([]int, len(cols))
	for i, c := range cols {
		fs := r.Schema().FieldIndices(c)
		if len(fs) == 0 {
			return fmt.Errorf("%w: %s: no column %s", snapshotfmt.ErrInvalidArgument, a.f.Name(), c)
		}
		idx[i] = fs[0]
	}
	a.rows = 0
	cells := make([]cell, len(cols))
	for i := 0; r.Next(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := r.Record()
		a.rows += rec.NumRows()
		for _, ci := range idx {
			if n := int64(rec.Column(ci).Len()); n != rec.NumRows() {
				return fmt.Errorf("%w: %s: record batch %d declares %d rows, its column %s holds %d", snapshotfmt.ErrCorrupt, a.f.Name(), i, rec.NumRows(), rec.ColumnName(ci), n)
			}
		}
		if err := scanRecord(rec, idx, cells, fn); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("%w: %s: Arrow IPC stream cut short or damaged: %v", snapshotfmt.ErrCorrupt, a.f.Name(), err)
	}
	return nil
}
