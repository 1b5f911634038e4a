package dataset

import (
	"context"
	"fmt"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// A dataset without rebucket's metadata (rewritten by DuckDB's COPY, made
// elsewhere) says nothing of state kinds, codecs or per-worker state (a
// job's source offsets). Guessing them changed a list state into a value
// state and dropped the offsets silently, so import refuses unless the
// caller says where they come from.

// likeSnapshot is what --like takes from an existing snapshot: its states
// (ids, kinds, codecs), width at write and per-worker state.
type likeSnapshot struct {
	states  []snapshotfmt.State
	width   int
	workers []workerStateIn
}

func readLike(ctx context.Context, dir string) (*likeSnapshot, error) {
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return nil, fmt.Errorf("--like %s: %w", dir, err)
	}
	m := s.Manifest()
	l := &likeSnapshot{width: m.WidthAtWrite}
	for _, st := range m.States {
		st.Entries = 0
		l.states = append(l.states, st)
	}
	for _, ws := range m.WorkerStates {
		in := workerStateIn{step: ws.Step, name: ws.Name, rule: ws.Rule, workers: make([][][]byte, m.WidthAtWrite), fixed: true}
		for _, wf := range ws.Files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if wf.Worker < 0 || wf.Worker >= m.WidthAtWrite {
				return nil, fmt.Errorf("--like %s: %w: per-worker state %s/%s lists worker %d of width %d", dir, snapshotfmt.ErrCorrupt, ws.Step, ws.Name, wf.Worker, m.WidthAtWrite)
			}
			items, err := s.ReadWorkerFile(wf)
			if err != nil {
				return nil, fmt.Errorf("--like %s: %w", dir, err)
			}
			in.workers[wf.Worker] = items
		}
		l.workers = append(l.workers, in)
	}
	return l, nil
}

// errNoMetadata is the refusal of a dataset without export metadata when
// the caller said nothing of where states and per-worker state come from.
func errNoMetadata(src string, needStates, needWorkers bool) error {
	var what string
	switch {
	case needStates && needWorkers:
		what = "its state kinds and codecs and its per-worker state (source offsets)"
	case needStates:
		what = "its state kinds and codecs"
	default:
		what = "its per-worker state (source offsets)"
	}
	return fmt.Errorf("%w: %s has no rebucket export metadata (a tool such as DuckDB's COPY drops it), so %s are unknown; say where they come from: --like SNAPSHOT (states, codecs, width and per-worker state of an existing snapshot), or --states FILE (the \"states\" of `rebucket inspect --json SNAPSHOT`) with --worker-state TABLE or --no-worker-state",
		snapshotfmt.ErrRefused, src, what)
}
