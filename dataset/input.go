package dataset

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Column classes an import accepts.
const (
	classBinary = "binary"
	classString = "string"
	classInt    = "integer"
	classOther  = "other"
)

// colInfo describes one top-level column of an input file.
type colInfo struct {
	class string
	desc  string // the type as the file states it, for messages
}

// cell is one column's value in a row.
type cell struct {
	b    []byte
	i    int64
	null bool
}

// part is one input file.
type part interface {
	path() string
	columns() map[string]colInfo
	meta() map[string]string
	// scan calls fn for every row with the cells of cols (which must exist),
	// valid only during the call. It fails (ErrCorrupt, naming the file and
	// row group or record batch) unless it read every row the file declares.
	scan(ctx context.Context, cols []string, fn func([]cell) error) error
	// declared is the number of rows the file declares: its footer's for
	// Parquet, the record batches' headers for Arrow (known after scan).
	declared() int64
	close()
}

// inputFile is one data file of a dataset with its Hive partition values.
type inputFile struct {
	path  string
	hive  map[string]string
	order []string // hive keys in path order
}

// listInputs returns the data files of a dataset path: the file itself, or
// every file under the directory whose name does not start with _ or .
// (the convention pyarrow and Spark follow), in path order. Nothing under
// the directory is skipped silently: a symbolic link is followed when it
// resolves to a regular file inside the dataset directory and refused
// otherwise; a FIFO, device or socket is refused (ErrInvalidArgument).
func listInputs(p string) ([]inputFile, error) {
	in, _, err := listDataset(p)
	return in, err
}

// listDataset is listInputs that also returns the entries the _ and .
// convention left out (a directory counts as one), for the summary.
func listDataset(p string) ([]inputFile, []string, error) {
	var skipped []string
	in, err := listInputsInto(p, &skipped)
	return in, skipped, err
}

func listInputsInto(p string, skipped *[]string) ([]inputFile, error) {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: dataset %s does not exist", snapshotfmt.ErrNotFound, p)
		}
		return nil, fmt.Errorf("dataset %s: %w", p, err)
	}
	if !st.IsDir() {
		return []inputFile{{path: p, hive: map[string]string{}}}, nil
	}
	root, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", p, err)
	}
	var out []inputFile
	err = filepath.WalkDir(p, func(q string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if q != p && (strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")) {
			*skipped = append(*skipped, q)
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		in := inputFile{path: q, hive: map[string]string{}}
		switch t := e.Type(); {
		case t.IsRegular():
		case t&fs.ModeSymlink != 0:
			real, err := resolveInside(root, q)
			if err != nil {
				return err
			}
			in.path = real
		default:
			return fmt.Errorf("%w: %s is %s, not a data file; remove it from the dataset directory", snapshotfmt.ErrInvalidArgument, q, modeName(t))
		}
		rel, _ := filepath.Rel(p, filepath.Dir(q))
		if rel != "." {
			for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
				k, v, ok := strings.Cut(seg, "=")
				if !ok {
					continue
				}
				if uv, err := url.PathUnescape(v); err == nil {
					v = uv
				}
				in.hive[k] = v
				in.order = append(in.order, k)
			}
		}
		out = append(out, in)
		return nil
	})
	if err != nil {
		if errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			return nil, err
		}
		return nil, fmt.Errorf("list dataset %s: %w", p, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// resolveInside resolves the symbolic link q and returns its target when
// that is a regular file inside the directory root (itself resolved);
// anything else is refused with ErrInvalidArgument.
func resolveInside(root, q string) (string, error) {
	real, err := filepath.EvalSymlinks(q)
	if err != nil {
		return "", fmt.Errorf("%w: %s is a symbolic link that does not resolve (%v)", snapshotfmt.ErrInvalidArgument, q, errors.Unwrap(err))
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %s is a symbolic link to %s, outside the dataset directory %s; copy the file in instead", snapshotfmt.ErrInvalidArgument, q, real, root)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("dataset file %s: %w", q, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is a symbolic link to %s, which is %s, not a data file", snapshotfmt.ErrInvalidArgument, q, real, modeName(st.Mode().Type()))
	}
	return real, nil
}

// modeName names a file type for a message.
func modeName(t fs.FileMode) string { return fsx.TypeName(t) }

// openPart opens one input file, telling Parquet from Arrow IPC by its
// magic bytes.
func openPart(p string) (part, error) {
	// Never blocks on a FIFO; refuses anything but a regular file.
	f, err := fsx.OpenRegular(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	size := st.Size()
	if size == 0 {
		f.Close()
		return nil, fmt.Errorf("%w: %s is empty: not a Parquet or Arrow IPC file", snapshotfmt.ErrCorrupt, p)
	}
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	var pt part
	switch {
	case bytes.HasPrefix(head, []byte("PAR1")):
		pt, err = openParquet(f, size)
	case bytes.HasPrefix(head, []byte("ARROW1")):
		if err = checkArrowFooter(f, size); err == nil {
			pt, err = openArrow(f)
		}
	case isArrowStream(head):
		pt, err = openArrowStream(f)
	default:
		f.Close()
		// Never quote the bytes: the file may be anything (a secret a
		// crafted path pointed at included).
		return nil, fmt.Errorf("%w: %s is not a Parquet or Arrow IPC file (it does not start with PAR1, ARROW1 or an Arrow IPC stream's message%s)", snapshotfmt.ErrCorrupt, p, looksLike(head))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return pt, nil
}

func looksLike(head []byte) string {
	if bytes.IndexByte(head, ',') >= 0 || bytes.IndexByte(head, '\t') >= 0 {
		return "; it looks like CSV text"
	}
	if len(head) > 0 && (head[0] == '{' || head[0] == '[') {
		return "; it looks like JSON"
	}
	return ""
}

// corrupt turns a panic inside a decoder of foreign bytes into ErrCorrupt.
func corrupt(what string, err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok && errors.Is(e, snapshotfmt.ErrTooLarge) {
			*err = fmt.Errorf("%s: %w", what, e)
			return
		}
		*err = fmt.Errorf("%w: %s: the decoder failed on damaged data: %v", snapshotfmt.ErrCorrupt, what, r)
	}
}

// ---- Parquet ----

type parquetPart struct {
	f    *os.File
	pf   *parquet.File
	cols map[string]colInfo
	md   map[string]string
}

func openParquet(f *os.File, size int64) (pt *parquetPart, err error) {
	defer corrupt("parquet footer", &err)
	// The tail is checked here, not by the library, whose message quotes
	// the bytes it found.
	var tail [8]byte
	if size < 12 {
		return nil, fmt.Errorf("%w: not a readable Parquet file: %d bytes is too small (truncated?)", snapshotfmt.ErrCorrupt, size)
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || footerLen > size-12 {
		return nil, fmt.Errorf("%w: not a readable Parquet file: no valid footer at its end (truncated or damaged?)", snapshotfmt.ErrCorrupt)
	}
	pf, err := parquet.OpenFile(f, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable Parquet file (truncated or damaged?): %v", snapshotfmt.ErrCorrupt, err)
	}
	if err := checkParquetLayout(pf.Metadata(), size-8-footerLen); err != nil {
		return nil, err
	}
	pt = &parquetPart{f: f, pf: pf, cols: map[string]colInfo{}, md: map[string]string{}}
	for _, kv := range pf.Metadata().KeyValueMetadata {
		pt.md[kv.Key] = kv.Value
	}
	for _, fl := range pf.Schema().Fields() {
		pt.cols[fl.Name()] = parquetColInfo(fl)
	}
	return pt, nil
}

// checkParquetLayout refuses a footer whose row counts disagree or whose
// column chunks lie outside the data part of the file (before the footer
// at dataEnd) or in another file: a reader may otherwise return fewer rows
// than the footer declares without an error.
func checkParquetLayout(md *format.FileMetaData, dataEnd int64) error {
	var sum int64
	for i, rg := range md.RowGroups {
		if rg.NumRows < 0 || sum+rg.NumRows < sum {
			return fmt.Errorf("%w: row group %d declares %d rows", snapshotfmt.ErrCorrupt, i, rg.NumRows)
		}
		sum += rg.NumRows
		for j, cc := range rg.Columns {
			col := fmt.Sprint(j)
			if len(cc.MetaData.PathInSchema) > 0 {
				col = strings.Join(cc.MetaData.PathInSchema, ".")
			}
			if cc.FilePath != "" {
				return fmt.Errorf("%w: row group %d column %s: its data is in another file; import reads self-contained files only", snapshotfmt.ErrCorrupt, i, col)
			}
			cm := cc.MetaData
			start := cm.DataPageOffset
			if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < start {
				start = cm.DictionaryPageOffset
			}
			if start < 4 || cm.TotalCompressedSize < 0 || cm.TotalCompressedSize > dataEnd || start > dataEnd-cm.TotalCompressedSize {
				return fmt.Errorf("%w: row group %d column %s: its chunk (offset %d, %d bytes) lies outside the file's data (bytes 4..%d): truncated or damaged", snapshotfmt.ErrCorrupt, i, col, start, cm.TotalCompressedSize, dataEnd)
			}
		}
	}
	if sum != md.NumRows {
		return fmt.Errorf("%w: the footer declares %d rows, its row groups %d: damaged", snapshotfmt.ErrCorrupt, md.NumRows, sum)
	}
	return nil
}

func parquetColInfo(n parquet.Node) colInfo {
	if !n.Leaf() {
		return colInfo{class: classOther, desc: "a group"}
	}
	if n.Repeated() {
		return colInfo{class: classOther, desc: "a repeated " + n.Type().String()}
	}
	t := n.Type()
	lt := t.LogicalType()
	switch t.Kind() {
	case parquet.ByteArray:
		if lt != nil {
			switch lt.Value.(type) {
			case *format.StringType, *format.EnumType, *format.JsonType:
				return colInfo{class: classString, desc: "string (" + t.String() + ")"}
			}
		}
		if ct := t.ConvertedType(); ct != nil && *ct == deprecated.UTF8 {
			return colInfo{class: classString, desc: "string (" + t.String() + ")"}
		}
		return colInfo{class: classBinary, desc: "binary"}
	case parquet.Int32, parquet.Int64:
		return colInfo{class: classInt, desc: t.String()}
	}
	return colInfo{class: classOther, desc: t.String()}
}

func (p *parquetPart) path() string                { return p.f.Name() }
func (p *parquetPart) columns() map[string]colInfo { return p.cols }
func (p *parquetPart) meta() map[string]string     { return p.md }
func (p *parquetPart) close()                      { p.f.Close() }
func (p *parquetPart) declared() int64             { return p.pf.NumRows() }

func (p *parquetPart) scan(ctx context.Context, cols []string, fn func([]cell) error) (err error) {
	defer corrupt(p.f.Name(), &err)
	idx := map[int]int{} // leaf index -> position in cols
	for i, c := range cols {
		lc, ok := p.pf.Schema().Lookup(c)
		if !ok {
			return fmt.Errorf("%w: %s: no column %s", snapshotfmt.ErrInvalidArgument, p.f.Name(), c)
		}
		idx[lc.ColumnIndex] = i
	}
	cells := make([]cell, len(cols))
	buf := make([]parquet.Row, 512)
	for g, rg := range p.pf.RowGroups() {
		rows := rg.Rows()
		var read int64
		for {
			n, rerr := rows.ReadRows(buf)
			read += int64(n)
			for _, row := range buf[:n] {
				for i := range cells {
					cells[i] = cell{null: true}
				}
				for _, v := range row {
					i, ok := idx[v.Column()]
					if !ok || v.IsNull() {
						continue
					}
					switch v.Kind() {
					case parquet.ByteArray, parquet.FixedLenByteArray:
						cells[i] = cell{b: v.ByteArray()}
					case parquet.Int32:
						cells[i] = cell{i: int64(v.Int32())}
					case parquet.Int64:
						cells[i] = cell{i: v.Int64()}
					}
				}
				if err := fn(cells); err != nil {
					rows.Close()
					return err
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				rows.Close()
				return fmt.Errorf("%w: %s: row group %d: %v", snapshotfmt.ErrCorrupt, p.f.Name(), g, rerr)
			}
			if err := ctx.Err(); err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("%w: %s: row group %d: %v", snapshotfmt.ErrCorrupt, p.f.Name(), g, err)
		}
		// Every declared row is read, or the import fails.
		if want := rg.NumRows(); read != want {
			return fmt.Errorf("%w: %s: row group %d: read %d of the %d rows it declares (truncated or damaged)", snapshotfmt.ErrCorrupt, p.f.Name(), g, read, want)
		}
	}
	return nil
}

// ---- Arrow IPC ----

// maxArrowLive bounds the memory the Arrow IPC reader may hold at once. The
// reader trusts the lengths a file claims (a compressed buffer states its
// decompressed size), so a damaged or hostile file could otherwise ask for
// hundreds of GiB; one record batch of an export is far below this.
const maxArrowLive = 1 << 30

// errArrowTooLarge is what limitAllocator panics with; scan's recover turns
// it into an error.
var errArrowTooLarge = fmt.Errorf("%w: an Arrow record batch claims more than %d MiB (damaged, or batches too large: write smaller ones)", snapshotfmt.ErrTooLarge, maxArrowLive>>20)

// limitAllocator is the Go allocator with a bound on live bytes.
type limitAllocator struct {
	mu   sync.Mutex
	live int64
	max  int64
	base memory.GoAllocator
}

func (a *limitAllocator) reserve(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < 0 || a.live+int64(n) > a.max {
		panic(errArrowTooLarge)
	}
	a.live += int64(n)
}

func (a *limitAllocator) release(n int) {
	a.mu.Lock()
	a.live -= int64(n)
	a.mu.Unlock()
}

func (a *limitAllocator) Allocate(size int) []byte {
	a.reserve(size)
	return a.base.Allocate(size)
}

func (a *limitAllocator) Reallocate(size int, b []byte) []byte {
	a.reserve(size - len(b))
	return a.base.Reallocate(size, b)
}

func (a *limitAllocator) Free(b []byte) {
	a.release(len(b))
	a.base.Free(b)
}

type arrowPart struct {
	f    *os.File
	r    *ipc.FileReader
	cols map[string]colInfo
	md   map[string]string
	rows int64 // declared by the record batches scanned
}

func openArrow(f *os.File) (ap *arrowPart, err error) {
	defer corrupt("arrow footer", &err)
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(&limitAllocator{max: maxArrowLive}))
	if err != nil {
		return nil, fmt.Errorf("%w: not a readable Arrow IPC file (truncated or damaged?): %v", snapshotfmt.ErrCorrupt, err)
	}
	ap = &arrowPart{f: f, r: r, cols: map[string]colInfo{}, md: r.Schema().Metadata().ToMap()}
	for _, fl := range r.Schema().Fields() {
		ap.cols[fl.Name] = arrowColInfo(fl.Type)
	}
	return ap, nil
}

func arrowColInfo(t arrow.DataType) colInfo {
	switch t.ID() {
	case arrow.BINARY, arrow.LARGE_BINARY:
		return colInfo{class: classBinary, desc: t.String()}
	case arrow.STRING, arrow.LARGE_STRING:
		return colInfo{class: classString, desc: t.String()}
	case arrow.INT32, arrow.INT64, arrow.UINT32:
		return colInfo{class: classInt, desc: t.String()}
	case arrow.DICTIONARY:
		in := arrowColInfo(t.(*arrow.DictionaryType).ValueType)
		in.desc = t.String()
		return in
	}
	return colInfo{class: classOther, desc: t.String()}
}

func (a *arrowPart) path() string                { return a.f.Name() }
func (a *arrowPart) columns() map[string]colInfo { return a.cols }
func (a *arrowPart) meta() map[string]string     { return a.md }
func (a *arrowPart) close()                      { a.r.Close(); a.f.Close() }
func (a *arrowPart) declared() int64             { return a.rows }

func (a *arrowPart) scan(ctx context.Context, cols []string, fn func([]cell) error) (err error) {
	defer corrupt(a.f.Name(), &err)
	idx := make([]int, len(cols))
	for i, c := range cols {
		fs := a.r.Schema().FieldIndices(c)
		if len(fs) == 0 {
			return fmt.Errorf("%w: %s: no column %s", snapshotfmt.ErrInvalidArgument, a.f.Name(), c)
		}
		idx[i] = fs[0]
	}
	cells := make([]cell, len(cols))
	for i := 0; i < a.r.NumRecords(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := a.r.RecordAt(i)
		if err != nil {
			return fmt.Errorf("%w: %s: record batch %d: %v", snapshotfmt.ErrCorrupt, a.f.Name(), i, err)
		}
		a.rows += rec.NumRows()
		// A column shorter than the batch declares would end the batch
		// early (or panic): every declared row is read, or the import fails.
		for _, ci := range idx {
			if n := int64(rec.Column(ci).Len()); n != rec.NumRows() {
				rec.Release()
				return fmt.Errorf("%w: %s: record batch %d declares %d rows, its column %s holds %d", snapshotfmt.ErrCorrupt, a.f.Name(), i, rec.NumRows(), rec.ColumnName(ci), n)
			}
		}
		if err := scanRecord(rec, idx, cells, fn); err != nil {
			rec.Release()
			return err
		}
		rec.Release()
	}
	return nil
}

func scanRecord(rec arrow.Record, idx []int, cells []cell, fn func([]cell) error) error {
	for r := 0; r < int(rec.NumRows()); r++ {
		for i, ci := range idx {
			cells[i] = arrowCell(rec.Column(ci), r)
		}
		if err := fn(cells); err != nil {
			return err
		}
	}
	return nil
}

func arrowCell(col arrow.Array, r int) cell {
	if col.IsNull(r) {
		return cell{null: true}
	}
	switch a := col.(type) {
	case *array.Binary:
		return cell{b: a.Value(r)}
	case *array.LargeBinary:
		return cell{b: a.Value(r)}
	case *array.String:
		return cell{b: stringBytes(a.Value(r))}
	case *array.LargeString:
		return cell{b: stringBytes(a.Value(r))}
	case *array.Int32:
		return cell{i: int64(a.Value(r))}
	case *array.Int64:
		return cell{i: a.Value(r)}
	case *array.Uint32:
		return cell{i: int64(a.Value(r))}
	case *array.Dictionary:
		return arrowCell(a.Dictionary(), a.GetValueIndex(r))
	}
	return cell{null: true}
}

// stringBytes views a string of an Arrow array as bytes without a copy (a
// copy per row was garbage the collector let grow the heap): cells are read
// only, and only during the scan callback.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
