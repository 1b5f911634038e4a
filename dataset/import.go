package dataset

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rebucket/rebucket/internal/extsort"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
	"github.com/rebucket/rebucket/writer"
)

// maxDupsNamed bounds the duplicates an error names.
const maxDupsNamed = 5

// ImportOptions tune an import. Buckets is required.
type ImportOptions struct {
	Buckets int
	Mapping snapshotfmt.Mapping // default mod
	// Width is the width at write of the new snapshot (default: the
	// export's, capped at Buckets; 1 for a dataset made elsewhere).
	// Per-worker state is redistributed to it by each state's rule.
	Width int
	// Dedupe is "", "first" or "last": what to do with rows of one (step,
	// state, key, sub-key). Empty makes duplicates an error.
	Dedupe string
	// States is the states table for a dataset without export metadata
	// (ids, kinds and codecs); nil infers it.
	States []snapshotfmt.State
	// WorkerState is a per-worker state table to import (default: the one
	// the export's metadata names).
	WorkerState string
	// NoWorkerState imports no per-worker state, said explicitly.
	NoWorkerState bool
	// Like is an existing snapshot whose states (kinds, codecs), width at
	// write and per-worker state the import takes (States, Width and
	// WorkerState, when set, win). A dataset without export metadata is
	// refused unless Like, or States with WorkerState or NoWorkerState,
	// says where these come from.
	Like string
	// InferStates accepts a dataset without export metadata with inferred
	// kinds (a map where sub_key is set, else a value), no codecs and no
	// per-worker state: for tests and callers that know the data is such.
	InferStates bool
	// Step and State are the step and state of every row of a table that
	// has no such columns (a plain key/value table).
	Step, State string
	// DryRun runs the checks and makes the plan (inputs, states, width,
	// per-worker state, the target) without reading rows or writing.
	DryRun bool
	// Memory bounds the sort's buffers (default plan.DefaultMemory(), as
	// rewrite); TmpDir is where it spills (default: beside the output).
	Memory int64
	TmpDir string
	Writer writer.Options
	// NoVerify skips reading the written snapshot back.
	NoVerify bool
	Progress progress.Reporter
	Tool     string
}

// ImportResult summarizes an import.
type ImportResult struct {
	Snapshot string   `json:"snapshot"`
	Inputs   []string `json:"inputs"`
	// Ignored are the entries of a dataset directory whose names start
	// with _ or . (the convention of pyarrow and Spark), the per-worker
	// state file read as such excepted: left out, but said.
	Ignored []string `json:"ignored"`
	// RowsDeclared is what the input files declare (Parquet footers,
	// Arrow record batch headers); RowsRead (and Rows, its older name)
	// what was read. An import that reads fewer fails instead.
	RowsDeclared uint64 `json:"rows_declared"`
	RowsRead     uint64 `json:"rows_read"`
	Rows         uint64 `json:"rows"`
	Entries      uint64 `json:"entries"`
	// Duplicates are the rows dropped by Dedupe (an error without it).
	Duplicates uint64 `json:"duplicates"`
	StatesFrom string `json:"states_from"` // export metadata, states file, inferred
	// Partial: the export was filtered, or the dataset is a part of an
	// export's directory (its rows are then not checked against the
	// source manifest's count).
	Partial      bool                     `json:"partial_export"`
	Partitioning snapshotfmt.Partitioning `json:"partitioning"`
	Width        int                      `json:"width"`
	States       []snapshotfmt.State      `json:"states"`
	WorkerStates []string                 `json:"worker_states"`
	// DryRun: only the checks ran; nothing was read past the files'
	// headers and nothing was written.
	DryRun       bool          `json:"dry_run,omitempty"`
	WorkerSource string        `json:"worker_state_source,omitempty"`
	Sort         extsort.Stats `json:"sort"`
	Verified     bool          `json:"verified"`
	Files        int           `json:"files"`
	DataBytes    int64         `json:"data_bytes"`
	// StaleRemoved and Leftover are the temporary directories beside the
	// target that were removed (dead runs') or left alone (see
	// writer.Stage).
	StaleRemoved  []string      `json:"stale_removed"`
	Leftover      []string      `json:"leftover"`
	Elapsed       time.Duration `json:"-"`
	ElapsedSecond float64       `json:"elapsed_seconds"`
}

// stateSlot is one state of the table being built.
type stateSlot struct {
	st              snapshotfmt.State
	withSub, nilSub uint64
}

// Import reads the dataset at src (a Parquet or Arrow IPC file, or a
// directory of them) and writes a complete snapshot to out.
func Import(ctx context.Context, src, out string, opts ImportOptions) (*ImportResult, error) {
	start := time.Now()
	if opts.Mapping == "" {
		opts.Mapping = snapshotfmt.MappingMod
	}
	layout, err := snapshotfmt.NewPartitioning(opts.Mapping, opts.Buckets)
	if err != nil {
		return nil, err
	}
	switch opts.Dedupe {
	case "", "first", "last":
	default:
		return nil, fmt.Errorf("%w: dedupe %q: want first or last", snapshotfmt.ErrInvalidArgument, opts.Dedupe)
	}
	if opts.Memory != 0 && opts.Memory < MinImportMemory {
		return nil, fmt.Errorf("%w: memory %d bytes is below import's floor of %d KiB (a smaller budget spills a run every few rows)", snapshotfmt.ErrInvalidArgument, opts.Memory, MinImportMemory>>10)
	}
	prog := progress.OrNop(opts.Progress)
	inputs, skipped, err := listDataset(src)
	if err != nil {
		return nil, err
	}
	// A directory without data files: an export of an empty snapshot. Its
	// metadata is in the per-worker state file, when there is one.
	var metaPart part
	if len(inputs) == 0 {
		mp, err := emptyExportMeta(src)
		if err != nil {
			return nil, err
		}
		if mp == nil && opts.States == nil {
			return nil, fmt.Errorf("%w: dataset directory %s holds no data files and no export metadata (an export of an empty snapshot without per-worker state); pass --states FILE to import an empty snapshot", snapshotfmt.ErrInvalidArgument, src)
		}
		if mp != nil {
			defer mp.close()
			metaPart = mp
		}
	}
	// Open and validate every file before reading any row.
	parts := make([]part, 0, len(inputs))
	defer func() {
		for _, p := range parts {
			p.close()
		}
	}()
	var problems []string
	for i := range inputs {
		// --step/--state stand in for absent columns, as a Hive path does.
		for c, v := range map[string]string{"step": opts.Step, "state": opts.State} {
			if _, ok := inputs[i].hive[c]; v != "" && !ok {
				inputs[i].hive[c] = v
			}
		}
	}
	for _, in := range inputs {
		if err := checkParquetFooter(in.path, opts.Memory); err != nil { // limits.go
			return nil, err
		}
		p, err := openPart(in.path)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		for c, v := range map[string]string{"step": opts.Step, "state": opts.State} {
			if _, has := p.columns()[c]; has && v != "" {
				problems = append(problems, fmt.Sprintf("%s: --%s %s is for a table without a %s column, and this one has it", in.path, c, v, c))
			}
		}
		if msg := checkSchema(p.columns(), in.hive); msg != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", in.path, msg))
		}
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more files", len(problems)-5))
		}
		return nil, fmt.Errorf("%w: the dataset does not have the export's schema (bucket, step, state, key, sub_key, value; key, sub_key and value binary):\n  %s",
			snapshotfmt.ErrInvalidArgument, strings.Join(problems, "\n  "))
	}

	res := &ImportResult{Snapshot: out, Partitioning: layout}
	for _, in := range inputs {
		res.Inputs = append(res.Inputs, in.path)
	}
	// Export metadata: the first file's; every file of one export has it.
	var em *ExportMeta
	var srcManifest *snapshotfmt.Manifest
	var lineage []snapshotfmt.Lineage
	if metaPart == nil && len(parts) > 0 {
		metaPart = parts[0]
	}
	if metaPart != nil {
		if s, ok := metaPart.meta()[MetaExport]; ok {
			if em, err = decodeExportMeta(s); err != nil {
				return nil, fmt.Errorf("%s: %w", metaPart.path(), err)
			}
			if ms, ok := metaPart.meta()[MetaManifest]; ok {
				if srcManifest, err = snapshotfmt.DecodeManifest([]byte(ms)); err != nil {
					return nil, fmt.Errorf("%s: metadata %s: %w", metaPart.path(), MetaManifest, err)
				}
				lineage = srcManifest.Lineage
			}
			if err := checkExportMeta(em, srcManifest); err != nil {
				return nil, fmt.Errorf("%s: %w", metaPart.path(), err)
			}
			res.Partial = em.Filter.Partial()
		}
	}
	var like *likeSnapshot
	if opts.Like != "" {
		if like, err = readLike(ctx, opts.Like); err != nil {
			return nil, err
		}
	} else if em == nil && !opts.InferStates {
		needStates, needWorkers := opts.States == nil, opts.WorkerState == "" && !opts.NoWorkerState
		if needStates || needWorkers {
			return nil, errNoMetadata(src, needStates, needWorkers)
		}
	}
	if opts.NoWorkerState && opts.WorkerState != "" {
		return nil, fmt.Errorf("%w: a per-worker state table and no per-worker state: choose one", snapshotfmt.ErrInvalidArgument)
	}
	slots := map[string]*stateSlot{}
	var order []*stateSlot
	known := false
	switch {
	case like != nil && opts.States == nil:
		known, res.StatesFrom = true, "like "+opts.Like
		if err := addStates(like.states, slots, &order); err != nil {
			return nil, fmt.Errorf("--like %s: %w", opts.Like, err)
		}
	case opts.States != nil:
		known, res.StatesFrom = true, "states file"
		if err := addStates(opts.States, slots, &order); err != nil {
			return nil, err
		}
	case em != nil:
		known, res.StatesFrom = true, "export metadata"
		if err := addStates(em.States, slots, &order); err != nil {
			return nil, fmt.Errorf("%s: metadata %s: %w", metaPart.path(), MetaExport, err)
		}
	default:
		res.StatesFrom = "inferred"
	}

	width := opts.Width
	if width == 0 {
		width = 1
		if like != nil && like.width > 0 {
			width = min(like.width, opts.Buckets)
		} else if em != nil && em.WidthAtWrite > 0 {
			width = min(em.WidthAtWrite, opts.Buckets)
		}
	}
	if width < 1 || width > opts.Buckets {
		return nil, fmt.Errorf("%w: width %d: want 1..%d (the bucket count)", snapshotfmt.ErrInvalidArgument, width, opts.Buckets)
	}
	res.Width = width

	// Per-worker state, read before anything is written.
	wsSrc := opts.WorkerState
	if wsSrc == "" && em != nil && em.WorkerStateFile != "" && like == nil && !opts.NoWorkerState {
		base := filepath.Dir(src)
		if st, err := os.Stat(src); err == nil && st.IsDir() {
			base = src
		}
		// A path from a file's metadata is untrusted: it must name a
		// file inside the dataset directory.
		if wsSrc, err = metaPathInside(base, em.WorkerStateFile); err != nil {
			return nil, err
		}
	}
	wsReal, _ := filepath.EvalSymlinks(wsSrc)
	for _, q := range skipped {
		// The per-worker table, or the _rebucket directory holding it, is
		// read, not ignored.
		if r, err := filepath.EvalSymlinks(q); err == nil && wsSrc != "" && (r == wsReal || filepath.Base(q) == WorkerStateDir && r == filepath.Dir(wsReal)) {
			continue
		}
		res.Ignored = append(res.Ignored, q)
	}
	var wstates []workerStateIn
	if like != nil && wsSrc == "" && !opts.NoWorkerState {
		res.WorkerSource, wstates = opts.Like, like.workers
	}
	if wsSrc != "" {
		res.WorkerSource = wsSrc
		var exp *workerExpect
		if em != nil {
			exp = &workerExpect{meta: em.WorkerStates, width: em.WidthAtWrite}
			if opts.WorkerState == "" {
				// The export's own table: its states are the metadata's
				// and its item counts the manifest's.
				exp.own, exp.manifest = true, srcManifest
			}
		}
		if wstates, err = readWorkerStates(ctx, wsSrc, exp); err != nil {
			return nil, err
		}
	}

	if opts.DryRun {
		// The checks and the plan: the target, every file's schema and
		// metadata, the states and per-worker state; no row is read and
		// nothing is written.
		if err := writer.CheckTarget(out, opts.Writer.Force, "--out"); err != nil {
			return nil, err
		}
		res.DryRun = true
		for _, p := range parts {
			if pp, ok := p.(*parquetPart); ok {
				res.RowsDeclared += uint64(pp.declared())
			}
		}
		for _, sl := range order {
			res.States = append(res.States, sl.st)
		}
		for _, ws := range wstates {
			res.WorkerStates = append(res.WorkerStates, ws.step+"/"+ws.name)
		}
		res.Elapsed = time.Since(start)
		res.ElapsedSecond = res.Elapsed.Seconds()
		return res, nil
	}

	tmp := opts.TmpDir
	if tmp == "" {
		tmp = filepath.Dir(filepath.Clean(out))
	}
	if opts.Memory <= 0 {
		opts.Memory = plan.DefaultMemory()
	}
	sorter := extsort.New(extsort.Options{Memory: opts.Memory, TmpDir: tmp})
	defer sorter.Close()

	// Progress in rows against the rows the files declare: Parquet
	// footers say it before the read; an Arrow IPC file's batches say it
	// only as they are read, so with one in the dataset the bar has no
	// total.
	var logical, declaredTotal, pending int64
	for _, p := range parts {
		pp, ok := p.(*parquetPart)
		if !ok {
			declaredTotal = 0
			break
		}
		declaredTotal += pp.declared()
	}
	progress.StartUnit(prog, declaredTotal, "import: read", progress.Rows)
	cols := []string{"step", "state", "key", "sub_key", "value"}
	var key []byte
	var listErr error
	for i, p := range parts {
		in := inputs[i]
		have := p.columns()
		present := make([]string, 0, len(cols))
		pos := make([]int, len(cols)) // position in present, or -1
		for j, c := range cols {
			if _, ok := have[c]; ok {
				pos[j] = len(present)
				present = append(present, c)
			} else {
				pos[j] = -1
			}
		}
		hiveStep, hiveState := []byte(in.hive["step"]), []byte(in.hive["state"])
		classOf := func(c string) string { return have[c].class }
		keyCls, subCls, valCls := classOf("key"), classOf("sub_key"), classOf("value")
		var keyBuf, subBuf, valBuf []byte
		var last *stateSlot // the slot of the previous row
		var rowN uint64
		err := p.scan(ctx, present, func(cs []cell) error {
			rowN++
			get := func(j int) cell {
				if pos[j] < 0 {
					return cell{null: true}
				}
				return cs[pos[j]]
			}
			stepC, stateC, keyC, subC, valC := get(0), get(1), get(2), get(3), get(4)
			if pos[0] < 0 {
				stepC = cell{b: hiveStep}
			}
			if pos[1] < 0 {
				stateC = cell{b: hiveState}
			}
			where := func() string { return fmt.Sprintf("%s row %d", in.path, rowN) }
			switch {
			case stepC.null || stateC.null:
				return fmt.Errorf("%w: %s: step or state is null", snapshotfmt.ErrInvalidArgument, where())
			case keyC.null:
				return fmt.Errorf("%w: %s: key is null", snapshotfmt.ErrInvalidArgument, where())
			case valC.null:
				return fmt.Errorf("%w: %s: value is null", snapshotfmt.ErrInvalidArgument, where())
			case len(keyC.b) > snapshotfmt.MaxKeyLen:
				return fmt.Errorf("%w: %s: key of %d bytes is over the %d MiB bound", snapshotfmt.ErrTooLarge, where(), len(keyC.b), snapshotfmt.MaxKeyLen>>20)
			}
			// Rows come in runs of one state: reuse the last slot without
			// building its name (a string per row was most of the
			// import's garbage, which the collector lets grow the heap).
			sl := last
			if sl == nil || string(stepC.b) != sl.st.Step || string(stateC.b) != sl.st.Name {
				step, name := string(stepC.b), string(stateC.b)
				q := step + "/" + name
				sl = slots[q]
				if sl == nil {
					if known {
						return fmt.Errorf("%w: %s: state %s is not in the states table (%s has %s)", snapshotfmt.ErrInvalidArgument, where(), clip(q), res.StatesFrom, slotNames(order))
					}
					if step == "" || name == "" || strings.Contains(step, "/") {
						return fmt.Errorf("%w: %s: step %q and state %q must be non-empty and the step must not contain '/'", snapshotfmt.ErrInvalidArgument, where(), clip(step), clip(name))
					}
					if len(order) >= 1<<16-1 {
						return fmt.Errorf("%w: more than 65535 states", snapshotfmt.ErrTooLarge)
					}
					sl = &stateSlot{st: snapshotfmt.State{ID: uint16(len(order) + 1), Step: step, Name: name, Kind: snapshotfmt.KindValue}}
					slots[q] = sl
					order = append(order, sl)
				}
				last = sl
			}
			if subC.null {
				sl.nilSub++
			} else {
				sl.withSub++
			}
			if known {
				isMap := sl.st.Kind == snapshotfmt.KindMap
				if isMap && subC.null {
					return fmt.Errorf("%w: %s: state %s is a map but sub_key is null", snapshotfmt.ErrInvalidArgument, where(), sl.st.QualifiedName())
				}
				if !isMap && !subC.null {
					return fmt.Errorf("%w: %s: state %s is a %s state but sub_key is set (only map state has sub-keys)", snapshotfmt.ErrInvalidArgument, where(), sl.st.QualifiedName(), sl.st.Kind)
				}
			} else if sl.withSub > 0 && sl.nilSub > 0 {
				return fmt.Errorf("%w: %s: state %s has rows with and without sub_key: it is neither a map (every row has one) nor a value state; give its kind with --states", snapshotfmt.ErrInvalidArgument, where(), sl.st.QualifiedName())
			}
			var err error
			if keyC.b, keyBuf, err = encodeTyped(keyC, keyCls, sl.st.KeyCodec, keyBuf, "key", sl, where); err != nil {
				return err
			}
			if !subC.null {
				if subC.b, subBuf, err = encodeTyped(subC, subCls, sl.st.SubKeyCodec, subBuf, "sub_key", sl, where); err != nil {
					return err
				}
			}
			if valC.b, valBuf, err = encodeTyped(valC, valCls, sl.st.ValueCodec, valBuf, "value", sl, where); err != nil {
				return err
			}
			if err := checkRowSize(where, len(keyC.b), len(subC.b), len(valC.b), opts.Memory); err != nil { // limits.go
				return err
			}
			if sl.st.Kind == snapshotfmt.KindList {
				if listErr = checkItems(valC.b); listErr != nil {
					return fmt.Errorf("%w: %s: state %s is a list state, but its value is not a list's item encoding (%v)", snapshotfmt.ErrInvalidArgument, where(), sl.st.QualifiedName(), listErr)
				}
			}
			key = snapshotfmt.AppendKey(key[:0], layout.Bucket(keyC.b), sl.st.ID, keyC.b, subC.b)
			if err := sorter.Add(key, valC.b); err != nil {
				return fmt.Errorf("import sort: %w", err)
			}
			res.Rows++
			n := int64(len(key) + len(valC.b))
			logical += n
			if pending++; pending == 4096 {
				prog.Add(pending)
				pending = 0
			}
			return nil
		})
		prog.Add(pending)
		pending = 0
		if err != nil {
			prog.Finish()
			return nil, err
		}
		// scan fails unless it read every row the file declares; this
		// states the same for the summary, and guards the invariant.
		if d := p.declared(); d < 0 || uint64(d) != rowN {
			prog.Finish()
			return nil, fmt.Errorf("%w: %s: read %d of the %d rows it declares", snapshotfmt.ErrCorrupt, in.path, rowN, d)
		}
		res.RowsDeclared += uint64(p.declared())
	}
	res.RowsRead = res.Rows
	prog.Finish()
	// A whole export declares its row count too: the entries of the
	// source manifest it carries. A part file lost or added is caught
	// here; a part of an export (one partition) is imported as partial.
	if em != nil && srcManifest != nil && !res.Partial {
		if wholeExport(src, inputs, em) {
			want := srcManifest.TotalEntries()
			if res.RowsRead != want {
				return nil, fmt.Errorf("%w: %s: the export's source manifest counts %d entries, its files hold %d rows: part files are missing, added or damaged; import the whole export as written", snapshotfmt.ErrCorrupt, src, want, res.RowsRead)
			}
		} else {
			res.Partial = true
		}
	}
	var states []snapshotfmt.State
	for _, sl := range order {
		st := sl.st
		if !known && sl.withSub > 0 {
			st.Kind = snapshotfmt.KindMap
		}
		st.Entries = 0
		states = append(states, st)
	}
	res.States = states

	it, err := sorter.Finish(ctx)
	if err != nil {
		return nil, fmt.Errorf("import sort: %w", err)
	}
	defer it.Close()
	lineage = append(lineage, snapshotfmt.Lineage{Tool: opts.Tool, Action: "import", ToBuckets: layout.Buckets, ToMapping: layout.Mapping,
		Note: fmt.Sprintf("from dataset %s (%d rows, states %s)", src, res.Rows, res.StatesFrom)})
	if em != nil {
		last := &lineage[len(lineage)-1]
		last.FromBuckets, last.FromMapping = em.Partitioning.Buckets, em.Partitioning.Mapping
	}
	w, err := writer.Create(out, writer.Header{
		Partitioning: layout, WidthAtWrite: width, States: states, Lineage: lineage, Tool: opts.Tool,
	}, opts.Writer)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	byID := map[uint16]snapshotfmt.State{}
	for _, st := range states {
		byID[st.ID] = st
	}
	fp := verify.NewFingerprinter(layout, states)
	bw := w.NewBucketWriter()
	prog.Start(logical, "import: write")
	var pendK, pendV []byte
	havePend := false
	var dups []string
	flush := func() error {
		if !havePend {
			return nil
		}
		if _, _, err := fp.Add(pendK, pendV); err != nil {
			return err
		}
		res.Entries++
		return bw.Add(pendK, pendV)
	}
	for it.Next() {
		k, v := it.Key(), it.Value()
		if havePend && string(k) == string(pendK) {
			res.Duplicates++
			switch opts.Dedupe {
			case "first":
			case "last":
				pendV = append(pendV[:0], v...)
			default:
				if len(dups) < maxDupsNamed {
					dups = append(dups, describeKey(k, byID))
				}
			}
			continue
		}
		if err := flush(); err != nil {
			bw.Abort()
			return nil, err
		}
		pendK, pendV, havePend = append(pendK[:0], k...), append(pendV[:0], v...), true
		prog.Add(int64(len(k) + len(v)))
	}
	if err := it.Err(); err != nil {
		bw.Abort()
		prog.Finish()
		return nil, fmt.Errorf("import sort: %w", err)
	}
	if err := flush(); err != nil {
		bw.Abort()
		prog.Finish()
		return nil, err
	}
	prog.Finish()
	if len(dups) > 0 {
		bw.Abort()
		return nil, fmt.Errorf("%w: %d duplicate rows (same step, state, key and sub-key), e.g. %s; pass --dedupe first or last to keep one",
			snapshotfmt.ErrInvalidArgument, res.Duplicates, strings.Join(dups, "; "))
	}
	if err := bw.Close(); err != nil {
		return nil, err
	}
	for _, ws := range wstates {
		items := snapshotfmt.Redistribute(ws.rule, ws.workers, width)
		if err := w.WriteWorkerState(ws.step, ws.name, ws.rule, items); err != nil {
			return nil, err
		}
		res.WorkerStates = append(res.WorkerStates, ws.step+"/"+ws.name)
	}
	m, err := w.Seal()
	committed = true // Seal removes the temporary directory on error
	if err != nil {
		return nil, err
	}
	res.Sort = sorter.Stats()
	res.States = m.States
	res.Files = len(m.Files)
	res.DataBytes = m.DataBytes()
	if !opts.NoVerify {
		// Read the sealed files back (checksums checked) and compare their
		// fingerprints with those of the entries handed to the writer,
		// before anything is published.
		if err := checkSealed(ctx, w.Dir(), layout, fp.Result()); err != nil {
			w.Abort()
			return nil, err
		}
		res.Verified = true
	}
	if err := w.Publish(); err != nil {
		return nil, err
	}
	res.StaleRemoved, res.Leftover = w.Stage().Removed, w.Stage().Leftover
	res.Elapsed = time.Since(start)
	res.ElapsedSecond = res.Elapsed.Seconds()
	return res, nil
}

// checkSealed reads a sealed, unpublished snapshot back and compares its
// fingerprints with those of what was written.
func checkSealed(ctx context.Context, dir string, layout snapshotfmt.Partitioning, want verify.FingerprintSet) error {
	snap, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return fmt.Errorf("verify the output before publishing: %w", err)
	}
	got, err := verify.Fingerprints(ctx, snap, layout, verify.FingerprintOptions{})
	if err != nil {
		return fmt.Errorf("verify the output before publishing: %w", err)
	}
	if d := want.Differ(got); len(d) > 0 {
		return fmt.Errorf("%w: %d buckets read back differ from what was written (first: %d); nothing was published", verify.ErrNotEqual, len(d), d[0])
	}
	return nil
}

func addStates(in []snapshotfmt.State, slots map[string]*stateSlot, order *[]*stateSlot) error {
	ids := map[uint16]bool{}
	for i, st := range in {
		if st.ID == 0 {
			st.ID = uint16(i + 1)
		}
		if st.Kind == "" {
			st.Kind = snapshotfmt.KindValue
		}
		q := st.QualifiedName()
		switch {
		case st.Step == "" || st.Name == "" || strings.Contains(st.Step, "/"):
			return fmt.Errorf("%w: states[%d]: step %q and name %q must be non-empty and the step must not contain '/'", snapshotfmt.ErrInvalidArgument, i, clip(st.Step), clip(st.Name))
		case st.Kind != snapshotfmt.KindValue && st.Kind != snapshotfmt.KindMap && st.Kind != snapshotfmt.KindList:
			return fmt.Errorf("%w: states[%d] (%s): kind %q, want value, map or list", snapshotfmt.ErrInvalidArgument, i, clip(q), clip(string(st.Kind)))
		case !snapshotfmt.KnownCodecs[st.KeyCodec] || !snapshotfmt.KnownCodecs[st.SubKeyCodec] || !snapshotfmt.KnownCodecs[st.ValueCodec]:
			return fmt.Errorf("%w: states[%d] (%s): unknown codec", snapshotfmt.ErrInvalidArgument, i, q)
		case ids[st.ID]:
			return fmt.Errorf("%w: states[%d] (%s): id %d used twice", snapshotfmt.ErrInvalidArgument, i, q, st.ID)
		case slots[q] != nil:
			return fmt.Errorf("%w: states[%d]: %s listed twice", snapshotfmt.ErrInvalidArgument, i, q)
		}
		ids[st.ID] = true
		st.Entries = 0
		sl := &stateSlot{st: st}
		slots[q] = sl
		*order = append(*order, sl)
	}
	return nil
}

// ParseStatesFile reads a states table: a JSON array of states, or an
// object with a "states" array (a manifest or an export's metadata).
func ParseStatesFile(data []byte) ([]snapshotfmt.State, error) {
	var arr []snapshotfmt.State
	if err := json.Unmarshal(data, &arr); err == nil {
		return arr, nil
	}
	var obj struct {
		States []snapshotfmt.State `json:"states"`
	}
	if err := json.Unmarshal(data, &obj); err != nil || obj.States == nil {
		return nil, fmt.Errorf("%w: states file: want a JSON array of {step, name, kind, key_codec, sub_key_codec, value_codec} or an object with \"states\"", snapshotfmt.ErrInvalidArgument)
	}
	return obj.States, nil
}

func slotNames(order []*stateSlot) string {
	names := make([]string, len(order))
	for i, s := range order {
		names[i] = s.st.QualifiedName()
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// describeKey names an entry for a message: STATE key=... [sub_key=...].
func describeKey(enc []byte, byID map[uint16]snapshotfmt.State) string {
	dk, err := snapshotfmt.DecodeKey(enc)
	if err != nil {
		return hex.EncodeToString(enc)
	}
	s := fmt.Sprintf("%s key=%s", byID[dk.State].QualifiedName(), printable(dk.Key))
	if byID[dk.State].Kind == snapshotfmt.KindMap {
		s += " sub_key=" + printable(dk.SubKey)
	}
	return s
}

// clip bounds a string from an input quoted in a message: a row's field
// may be megabytes long.
func clip(s string) string {
	const max = 120
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

func printable(b []byte) string {
	if len(b) > 120 {
		return printable(b[:120]) + "..."
	}
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Sprintf("%q", b)
	}
	return "0x" + hex.EncodeToString(b)
}

// checkSchema names every missing or mistyped column ("" when fine). The
// step and state columns may come from the Hive path instead.
func checkSchema(cols map[string]colInfo, hive map[string]string) string {
	var bad []string
	need := func(name string, classes ...string) {
		ci, ok := cols[name]
		if !ok {
			if _, inPath := hive[name]; inPath && (name == "step" || name == "state") {
				return
			}
			bad = append(bad, "missing column "+name)
			return
		}
		for _, c := range classes {
			if ci.class == c {
				return
			}
		}
		hint := ""
		if ci.class == classString && classes[0] == classBinary {
			hint = " (cast it to binary)"
		}
		bad = append(bad, fmt.Sprintf("column %s is %s, want %s%s", name, ci.desc, strings.Join(classes, " or "), hint))
	}
	need("step", classString, classBinary)
	need("state", classString, classBinary)
	// A plain table's VARCHAR or BIGINT key and value are encoded by the
	// state's codec hint (utf8/json/bytes text as is, int64 big-endian).
	need("key", classBinary, classString, classInt)
	need("value", classBinary, classString, classInt)
	if _, ok := cols["sub_key"]; ok {
		need("sub_key", classBinary, classString, classInt)
	}
	return strings.Join(bad, "; ")
}

// encodeTyped gives the bytes of a key, sub-key or value cell of a typed
// column by the state's codec: an integer column is int64 big-endian (the
// codec must be int64), a string column its UTF-8 text (any codec but
// int64), a binary column as is.
func encodeTyped(c cell, class, codec string, buf []byte, col string, sl *stateSlot, where func() string) ([]byte, []byte, error) {
	switch class {
	case classInt:
		if codec != "int64" {
			return nil, buf, fmt.Errorf("%w: %s: column %s is an integer, but state %s's %s codec is %q: give it codec int64 (--states, --like) or cast the column to binary", snapshotfmt.ErrInvalidArgument, where(), col, sl.st.QualifiedName(), col, codec)
		}
		buf = binary.BigEndian.AppendUint64(buf[:0], uint64(c.i))
		return buf, buf, nil
	case classString:
		if codec == "int64" {
			return nil, buf, fmt.Errorf("%w: %s: column %s is a string, but state %s's %s codec is int64: cast the column to BIGINT", snapshotfmt.ErrInvalidArgument, where(), col, sl.st.QualifiedName(), col)
		}
	}
	return c.b, buf, nil
}
