package flink

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// ScanOptions tune Inspect and Verify.
type ScanOptions struct {
	// Parallelism is the number of reading goroutines (default GOMAXPROCS).
	Parallelism int
	// CheckKeys rehashes every key and checks its key group (Verify).
	CheckKeys bool
	// framedFP fingerprints each entry as framed in the stream, key-group
	// prefix included (Rewrite's self-check, against fingerprints taken
	// while routing), instead of without its prefix (comparable across
	// max parallelisms).
	framedFP bool
	Progress Progress
}

// Report is what a full read of a savepoint found: the model that inspect
// renders and verify judges.
type Report struct {
	Path           string           `json:"path"`
	Version        int32            `json:"metadata_version"`
	CheckpointID   int64            `json:"checkpoint_id"`
	MaxParallelism int              `json:"max_parallelism"`
	MasterStates   []string         `json:"master_states,omitempty"`
	Operators      []OperatorReport `json:"operators"`
	Entries        uint64           `json:"entries"`
	// Findings are problems in well-formed files: entries in the wrong key
	// group, ranges outside max parallelism, overlapping handles.
	Findings      []Finding `json:"findings"`
	FindingsTotal int       `json:"findings_total"`

	fp map[string]*Fingerprint
}

// OperatorReport describes one operator.
type OperatorReport struct {
	UID            string `json:"uid,omitempty"`
	Name           string `json:"name,omitempty"`
	ID             string `json:"id"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"max_parallelism"`
	Subtasks       int    `json:"subtasks"`
	FullyFinished  bool   `json:"fully_finished,omitempty"`
	Coordinator    int    `json:"coordinator_state_bytes,omitempty"`
	// Keyed state (empty for operators without it).
	KeySerializer string             `json:"key_serializer,omitempty"`
	KeyType       string             `json:"key_type,omitempty"` // "" if not rehashable
	KeyTypeError  string             `json:"key_type_error,omitempty"`
	Compressed    bool               `json:"compressed,omitempty"`
	States        []StateReport      `json:"keyed_states,omitempty"`
	KeyGroups     []KeyGroupLoad     `json:"key_groups,omitempty"` // index = key group
	SubtaskLoads  []SubtaskLoad      `json:"subtask_loads,omitempty"`
	OperatorState []OperatorStateRep `json:"operator_state,omitempty"`
}

// StateReport describes one keyed state.
type StateReport struct {
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Serializers map[string]string `json:"serializers"`
	Entries     uint64            `json:"entries"`
	Bytes       uint64            `json:"bytes"`
}

// KeyGroupLoad is the entries and bytes of one key group.
type KeyGroupLoad struct {
	Entries uint64 `json:"entries"`
	Bytes   uint64 `json:"bytes"`
}

// SubtaskLoad is one subtask's keyed handle.
type SubtaskLoad struct {
	Subtask    int    `json:"subtask"`
	StartGroup int    `json:"start_key_group"`
	EndGroup   int    `json:"end_key_group"`
	Handle     string `json:"handle"`
	Bytes      int64  `json:"bytes"`
	Entries    uint64 `json:"entries"`
}

// OperatorStateRep is one named operator state of one subtask.
type OperatorStateRep struct {
	Subtask    int    `json:"subtask"`
	Name       string `json:"name"`
	Mode       string `json:"mode"`
	Partitions int    `json:"partitions"`
	Handle     string `json:"handle"`
	Bytes      int64  `json:"handle_bytes"`
}

// Finding is one problem Verify found.
type Finding struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	KeyGroup int    `json:"key_group"`
	State    string `json:"state,omitempty"`
	Problem  string `json:"problem"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("operator %s subtask %d", f.Operator, f.Subtask)
	if f.KeyGroup >= 0 {
		s += fmt.Sprintf(" key group %d", f.KeyGroup)
	}
	if f.State != "" {
		s += fmt.Sprintf(" state %q", f.State)
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

// Inspect reads every keyed entry of the savepoint and reports its model.
func Inspect(ctx context.Context, path string, opts ScanOptions) (*Report, error) {
	sp, err := Open(path)
	if err != nil {
		return nil, err
	}
	return sp.scan(ctx, opts)
}

// Verify reads every entry, rehashes every key, and reports findings:
// a key-group prefix that differs from its section or from the key group
// its key hashes to, key groups outside max parallelism or covered twice,
// bytes between a section's end mark and the next section. Damage that
// stops reading (truncated or unreadable files) is an error wrapping
// snapshotfmt.ErrCorrupt. Keys whose type cannot be rehashed give a
// finding.
func Verify(ctx context.Context, path string, opts ScanOptions) (*Report, error) {
	opts.CheckKeys = true
	return Inspect(ctx, path, opts)
}

func (sp *Savepoint) scan(ctx context.Context, opts ScanOptions) (*Report, error) {
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	md := sp.Meta
	rep := &Report{Path: sp.Dir, Version: md.Version, CheckpointID: md.CheckpointID, MaxParallelism: sp.MaxParallelism(), fp: map[string]*Fingerprint{}}
	for _, ms := range md.MasterStates {
		rep.MasterStates = append(rep.MasterStates, JavaString(ms.Name))
	}
	fs := &findings{}
	ops, err := sp.openKeyedOps()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range ops {
			k.close()
		}
	}()
	byOp := map[*OperatorState]*keyedOp{}
	for _, k := range ops {
		byOp[k.op] = k
	}
	type opAcc struct {
		mu      sync.Mutex
		states  []StateReport
		kgs     []KeyGroupLoad
		subs    []SubtaskLoad
		entries uint64
	}
	accs := map[*keyedOp]*opAcc{}
	var total int64
	for _, op := range md.Operators {
		// Operators may differ in max parallelism (it is set per job
		// vertex); each keyed operator is checked against its own.
		k := byOp[op]
		if k == nil {
			continue
		}
		a := &opAcc{kgs: make([]KeyGroupLoad, max(op.MaxParallelism, 0))}
		accs[k] = a
		for _, s := range k.header.States {
			sr := StateReport{Name: JavaString(s.Name), Kind: s.Kind(), Serializers: map[string]string{}}
			for _, n := range s.Serializers {
				sr.Serializers[n.Key] = n.Snapshot.Class
			}
			a.states = append(a.states, sr)
		}
		if k.codecErr != nil {
			fs.add(Finding{Operator: op.Label(), Subtask: -1, KeyGroup: -1, Problem: "keys cannot be rehashed: " + k.codecErr.Error()})
		}
		seen := map[int]int{}
		for _, s := range k.streams {
			h := s.Handle
			sub := subtaskOf(op, h)
			a.subs = append(a.subs, SubtaskLoad{Subtask: sub, StartGroup: int(h.StartKeyGroup), EndGroup: int(h.EndKeyGroup()), Handle: h.Delegate.Kind(), Bytes: s.Size})
			total += s.Size
			for g := int(h.StartKeyGroup); g <= int(h.EndKeyGroup()); g++ {
				if g >= int(op.MaxParallelism) {
					fs.add(Finding{Operator: op.Label(), Subtask: sub, KeyGroup: g, Problem: fmt.Sprintf("key group outside max parallelism %d", op.MaxParallelism)})
					break
				}
				if o, dup := seen[g]; dup {
					fs.add(Finding{Operator: op.Label(), Subtask: sub, KeyGroup: g, Problem: fmt.Sprintf("key group also covered by subtask %d", o)})
				}
				seen[g] = sub
			}
		}
	}
	opts.Progress.Start(total, "read keyed state")
	defer opts.Progress.Finish()
	type local struct {
		fp   map[*keyedOp]*stateFPs
		hbuf []byte
	}
	locals := make([]*local, max(opts.Parallelism, 16))
	var lmu sync.Mutex
	err = scanSections(ctx, allSections(ops), opts.Parallelism, func(w int, j sectionJob, rd *sectionReader) error {
		lmu.Lock()
		if w >= len(locals) {
			locals = append(locals, make([]*local, w+1-len(locals))...)
		}
		l := locals[w]
		if l == nil {
			l = &local{fp: map[*keyedOp]*stateFPs{}}
			locals[w] = l
		}
		lmu.Unlock()
		k := j.op
		op := k.op
		s := k.streams[j.stream]
		sub := subtaskOf(op, s.Handle)
		maxP := int(op.MaxParallelism)
		w2 := keytype.PrefixBytes(maxP)
		remap := k.remap[j.stream]
		kgl := KeyGroupLoad{}
		stateLoads := make([]KeyGroupLoad, len(k.header.States))
		bad := 0
		sf := l.fp[k]
		if sf == nil {
			sf = &stateFPs{op: op, ids: k.header.States, fp: make([]Fingerprint, len(k.header.States))}
			l.fp[k] = sf
		}
		st, err := s.ReadSection(j.sec, rd, func(e Entry) error {
			id := remap[e.StateID]
			meta := k.header.States[id]
			n := uint64(len(e.Key) + len(e.Value))
			kgl.Entries++
			kgl.Bytes += n
			stateLoads[id].Entries++
			stateLoads[id].Bytes += n
			if len(e.Key) < w2 {
				return fmt.Errorf("%w: %s: key group %d: key %x shorter than its %d-byte prefix", snapshotfmt.ErrCorrupt, s.Where, j.sec.KeyGroup, e.Key, w2)
			}
			prefix := int(e.Key[0])
			if w2 == 2 {
				prefix = prefix<<8 | int(e.Key[1])
			}
			if prefix != j.sec.KeyGroup && bad < 3 {
				bad++
				fs.add(Finding{Operator: op.Label(), Subtask: sub, KeyGroup: j.sec.KeyGroup, State: JavaString(meta.Name), Problem: fmt.Sprintf("entry with key-group prefix %d in the section of key group %d (key %x)", prefix, j.sec.KeyGroup, e.Key)})
			}
			if opts.CheckKeys && k.codecErr == nil {
				h, err := k.hashKey(meta, e.Key, w2)
				if err != nil {
					return fmt.Errorf("%s: key group %d: %w", s.Where, j.sec.KeyGroup, err)
				}
				if g := keytype.KeyGroup(h, maxP); g != prefix && bad < 3 {
					bad++
					fs.add(Finding{Operator: op.Label(), Subtask: sub, KeyGroup: j.sec.KeyGroup, State: JavaString(meta.Name), Problem: fmt.Sprintf("key %x hashes to key group %d, its prefix says %d: Flink would restore it on the wrong subtask or lose it", e.Key, g, prefix)})
				}
			}
			var sum xxh3.Uint128
			if opts.framedFP {
				f := e.Framed(l.hbuf)
				if e.framed == nil {
					l.hbuf = f
				}
				sum = xxh3.Hash128(f)
			} else {
				l.hbuf, sum = entryHash(l.hbuf, e.Key[w2:], e.Value)
			}
			sf.fp[id].add(sum, len(e.Key)-w2+len(e.Value))
			return nil
		})
		if err != nil {
			return err
		}
		if st.Trailing > 0 {
			fs.add(Finding{Operator: op.Label(), Subtask: sub, KeyGroup: j.sec.KeyGroup, Problem: fmt.Sprintf("%d bytes between the end mark and the next section: offsets are inconsistent", st.Trailing)})
		}
		opts.Progress.Add(j.sec.End - j.sec.Start)
		a := accs[k]
		a.mu.Lock()
		if j.sec.KeyGroup < len(a.kgs) {
			a.kgs[j.sec.KeyGroup].Entries += kgl.Entries
			a.kgs[j.sec.KeyGroup].Bytes += kgl.Bytes
		}
		for i, sl := range stateLoads {
			a.states[i].Entries += sl.Entries
			a.states[i].Bytes += sl.Bytes
		}
		for i := range a.subs {
			if a.subs[i].Subtask == sub {
				a.subs[i].Entries += kgl.Entries
			}
		}
		a.entries += kgl.Entries
		a.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range locals {
		if l == nil {
			continue
		}
		for _, sf := range l.fp {
			sf.into(rep.fp)
		}
	}
	for _, op := range md.Operators {
		or := OperatorReport{UID: JavaString(op.UID), Name: JavaString(op.Name), ID: op.IDString(), Parallelism: int(op.Parallelism), MaxParallelism: int(op.MaxParallelism), Subtasks: len(op.Subtasks), FullyFinished: op.FullyFinished}
		if op.Coordinator != nil {
			or.Coordinator = len(op.Coordinator.Data)
		}
		for _, st := range op.Subtasks {
			for _, h := range []*OperatorStateHandle{st.ManagedOperator, st.RawOperator} {
				if h == nil {
					continue
				}
				if h.Delegate != nil {
					if _, _, c, _, err := sp.openHandle(h.Delegate); err != nil {
						fs.add(Finding{Operator: op.Label(), Subtask: int(st.Index), KeyGroup: -1, Problem: "operator state unreadable: " + err.Error()})
					} else {
						c.Close()
					}
				}
				for _, m := range h.States {
					r := OperatorStateRep{Subtask: int(st.Index), Name: JavaString(m.Name), Mode: m.ModeName(), Partitions: len(m.Offsets)}
					if h.Delegate != nil {
						r.Handle, r.Bytes = h.Delegate.Kind(), h.Delegate.Len()
					}
					for _, o := range m.Offsets {
						if h.Delegate == nil || o < 0 || o >= h.Delegate.Len() {
							fs.add(Finding{Operator: op.Label(), Subtask: int(st.Index), KeyGroup: -1, State: JavaString(m.Name), Problem: fmt.Sprintf("operator state partition offset %d outside its %d-byte stream", o, r.Bytes)})
							break
						}
					}
					or.OperatorState = append(or.OperatorState, r)
				}
			}
		}
		if k := byOp[op]; k != nil {
			a := accs[k]
			or.KeySerializer = k.header.Key.Class
			or.Compressed = k.header.Compressed
			if k.codecErr == nil {
				or.KeyType = k.codec.Name()
			} else {
				or.KeyTypeError = k.codecErr.Error()
			}
			or.States, or.KeyGroups, or.SubtaskLoads = a.states, a.kgs, a.subs
			slices.SortFunc(or.SubtaskLoads, func(x, y SubtaskLoad) int { return x.StartGroup - y.StartGroup })
			rep.Entries += a.entries
		}
		rep.Operators = append(rep.Operators, or)
	}
	rep.Findings, rep.FindingsTotal = fs.list, fs.total
	return rep, nil
}

func subtaskOf(op *OperatorState, h *KeyedHandle) int {
	for _, st := range op.Subtasks {
		if st.ManagedKeyed == h {
			return int(st.Index)
		}
	}
	return -1
}

// diffFingerprints compares keyed-state fingerprints per operator and
// state; "" if equal.
func diffFingerprints(a, b map[string]*Fingerprint) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		x, y := a[k], b[k]
		if x == nil {
			x = &Fingerprint{}
		}
		if y == nil {
			y = &Fingerprint{}
		}
		if *x != *y {
			op, st, _ := cut(k)
			return fmt.Sprintf("operator %s state %q: %d entries (%d bytes) against %d entries (%d bytes), or same counts with different contents", op, JavaString(st), x.Entries, x.Bytes, y.Entries, y.Bytes)
		}
	}
	return ""
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
