package verify

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// compareWorkerStates compares per-worker state by (step, name); see Equal
// for what "equal" means under each rule when the widths differ.
func (e *equaler) compareWorkerStates() {
	tm, sm := e.tgt.Manifest(), e.src.Manifest()
	tws := map[string]snapshotfmt.WorkerState{}
	for _, ws := range tm.WorkerStates {
		tws[ws.QualifiedName()] = ws
	}
	report := func(name, format string, args ...any) {
		f := newFinding(WorkerStateDiff, SevError, format, args...)
		f.State = name
		e.emitCapped(f)
	}
	seen := map[string]bool{}
	for _, s := range sm.WorkerStates {
		name := s.QualifiedName()
		seen[name] = true
		e.sum.WorkerStates++
		t, ok := tws[name]
		if !ok {
			report(name, "per-worker state is in SOURCE only")
			continue
		}
		if t.Rule != s.Rule {
			report(name, "rule is %s in TARGET, %s in SOURCE", t.Rule, s.Rule)
			continue
		}
		ti, err1 := readWorkerItems(e.tgt, t)
		si, err2 := readWorkerItems(e.src, s)
		if err1 != nil || err2 != nil {
			report(name, "cannot be compared: TARGET: %v; SOURCE: %v", err1, err2)
			continue
		}
		if msg := diffWorkerItems(s.Rule, ti, si); msg != "" {
			report(name, "%s", msg)
		}
	}
	for _, t := range tm.WorkerStates {
		if !seen[t.QualifiedName()] {
			report(t.QualifiedName(), "per-worker state is in TARGET only")
		}
	}
}

func readWorkerItems(s *reader.Snapshot, ws snapshotfmt.WorkerState) ([][][]byte, error) {
	out := make([][][]byte, len(ws.Files))
	for i, wf := range ws.Files {
		items, err := s.ReadWorkerFile(wf)
		if err != nil {
			return nil, err
		}
		out[i] = items
	}
	return out, nil
}

// diffWorkerItems describes the first difference, or returns "".
func diffWorkerItems(rule snapshotfmt.Rule, t, s [][][]byte) string {
	if len(t) == len(s) {
		for w := range s {
			if len(t[w]) != len(s[w]) {
				return fmt.Sprintf("worker %d holds %d items in TARGET, %d in SOURCE", w, len(t[w]), len(s[w]))
			}
			for i := range s[w] {
				if !bytes.Equal(t[w][i], s[w][i]) {
					return fmt.Sprintf("worker %d item %d is %s in TARGET, %s in SOURCE", w, i, preview(t[w][i]), preview(s[w][i]))
				}
			}
		}
		return ""
	}
	switch rule {
	case snapshotfmt.RuleBroadcast:
		var t0, s0 [][]byte
		if len(t) > 0 {
			t0 = t[0]
		}
		if len(s) > 0 {
			s0 = s[0]
		}
		return diffMultiset(t0, s0, "worker 0's copy")
	case snapshotfmt.RuleUnion:
		return diffMultiset(distinct(concat(t)), distinct(concat(s)), "the set of items")
	default:
		return diffMultiset(concat(t), concat(s), "the items (as a multiset; widths differ)")
	}
}

func concat(ws [][][]byte) [][]byte {
	var out [][]byte
	for _, w := range ws {
		out = append(out, w...)
	}
	return out
}

func distinct(items [][]byte) [][]byte {
	sortItems(items)
	var out [][]byte
	for i, it := range items {
		if i == 0 || !bytes.Equal(it, items[i-1]) {
			out = append(out, it)
		}
	}
	return out
}

func sortItems(items [][]byte) {
	sort.Slice(items, func(i, j int) bool { return bytes.Compare(items[i], items[j]) < 0 })
}

func diffMultiset(t, s [][]byte, what string) string {
	t, s = append([][]byte(nil), t...), append([][]byte(nil), s...)
	sortItems(t)
	sortItems(s)
	i, j := 0, 0
	for i < len(s) || j < len(t) {
		switch {
		case j == len(t) || (i < len(s) && bytes.Compare(s[i], t[j]) < 0):
			return fmt.Sprintf("%s differ: item %s is in SOURCE only", what, preview(s[i]))
		case i == len(s) || bytes.Compare(s[i], t[j]) > 0:
			return fmt.Sprintf("%s differ: item %s is in TARGET only", what, preview(t[j]))
		default:
			i++
			j++
		}
	}
	return ""
}
