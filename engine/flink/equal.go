package flink

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/zeebo/xxh3"
)

// EqualReport says whether two savepoints hold the same state.
type EqualReport struct {
	Equal       bool     `json:"equal"`
	EntriesA    uint64   `json:"entries_a"`
	EntriesB    uint64   `json:"entries_b"`
	Differences []string `json:"differences"`
}

// Equal proves that two savepoints hold the same keyed entries (operator,
// state, key, namespace, user key, value: compared by order-independent
// fingerprints, so across different max parallelisms and file splits), the
// same operator state (per operator and subtask: names, modes, offsets and
// bytes), coordinator and master state. Operators without any state may be
// present in one only (the State Processor API drops them).
func Equal(ctx context.Context, a, b string, opts ScanOptions) (*EqualReport, error) {
	spA, err := Open(a)
	if err != nil {
		return nil, err
	}
	spB, err := Open(b)
	if err != nil {
		return nil, err
	}
	opts.CheckKeys = false
	ra, err := spA.scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	rb, err := spB.scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	rep := &EqualReport{EntriesA: ra.Entries, EntriesB: rb.Entries}
	for {
		d := diffFingerprints(ra.fp, rb.fp)
		if d == "" {
			break
		}
		rep.Differences = append(rep.Differences, "keyed state: "+d)
		// Drop the differing key so the next one is found too.
		for k := range ra.fp {
			if x, y := ra.fp[k], rb.fp[k]; y == nil || *x != *y {
				delete(ra.fp, k)
				delete(rb.fp, k)
			}
		}
		for k := range rb.fp {
			if _, ok := ra.fp[k]; !ok {
				delete(rb.fp, k)
			}
		}
	}
	da, err := spA.nonKeyedDigest()
	if err != nil {
		return nil, err
	}
	db, err := spB.nonKeyedDigest()
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range da {
		keys = append(keys, k)
	}
	for k := range db {
		if _, ok := da[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if da[k] != db[k] {
			rep.Differences = append(rep.Differences, k+" differs")
		}
	}
	rep.Equal = len(rep.Differences) == 0
	return rep, nil
}

// nonKeyedDigest digests master, coordinator and operator state, keyed by
// a description of what each digest covers.
func (sp *Savepoint) nonKeyedDigest() (map[string]xxh3.Uint128, error) {
	out := map[string]xxh3.Uint128{}
	for _, ms := range sp.Meta.MasterStates {
		var b bytes.Buffer
		binary.Write(&b, binary.BigEndian, ms.Version)
		b.Write(ms.Data)
		out[fmt.Sprintf("master state %q", JavaString(ms.Name))] = xxh3.Hash128(b.Bytes())
	}
	for _, op := range sp.Meta.Operators {
		if op.Coordinator != nil {
			out["coordinator state of operator "+op.IDString()] = xxh3.Hash128(op.Coordinator.Data)
		}
		for _, st := range op.Subtasks {
			for i, h := range []*OperatorStateHandle{st.ManagedOperator, st.RawOperator} {
				if h == nil {
					continue
				}
				var b bytes.Buffer
				for _, m := range h.States {
					fmt.Fprintf(&b, "%q %d %v;", m.Name, m.Mode, m.Offsets)
				}
				if h.Delegate != nil {
					r, size, c, _, err := sp.openHandle(h.Delegate)
					if err != nil {
						return nil, fmt.Errorf("operator state of %s: %w", op.Label(), err)
					}
					_, err = io.Copy(&b, io.NewSectionReader(r, 0, size))
					c.Close()
					if err != nil {
						return nil, err
					}
				}
				kind := [2]string{"managed", "raw"}[i]
				out[fmt.Sprintf("%s operator state of operator %s subtask %d", kind, op.IDString(), st.Index)] = xxh3.Hash128(b.Bytes())
			}
		}
	}
	return out, nil
}
