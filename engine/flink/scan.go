package flink

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// keyedOp is one operator's keyed state: the streams of its subtasks, the
// header the rewrite writes, and the key codec that rehashes its keys.
type keyedOp struct {
	op       *OperatorState
	streams  []*KeyedStream
	header   *StreamHeader // of streams[0]; output states use its ids
	remap    [][]int       // per stream: its state id -> header's state id
	codec    keytype.Codec
	codecErr error
}

func (k *keyedOp) close() {
	for _, s := range k.streams {
		s.Close()
	}
}

// stateNames lists the keyed states for messages.
func (k *keyedOp) stateNames() string {
	var n []string
	for _, s := range k.header.States {
		n = append(n, fmt.Sprintf("%q", JavaString(s.Name)))
	}
	return strings.Join(n, ", ")
}

// openKeyedOps opens every keyed stream of the savepoint. Raw keyed state
// (written by user code) is refused: it cannot be regrouped.
func (sp *Savepoint) openKeyedOps() ([]*keyedOp, error) {
	var ops []*keyedOp
	fail := func(err error) ([]*keyedOp, error) {
		for _, k := range ops {
			k.close()
		}
		return nil, err
	}
	for _, op := range sp.Meta.Operators {
		var k *keyedOp
		for _, st := range op.Subtasks {
			if st.RawKeyed != nil {
				return fail(fmt.Errorf("%w: operator %s subtask %d holds raw keyed state (written by user code through KeyedStateCheckpointOutputStream); its entries cannot be regrouped", snapshotfmt.ErrUnsupported, op.Label(), st.Index))
			}
			if st.ManagedKeyed == nil {
				continue
			}
			if k == nil {
				k = &keyedOp{op: op}
				ops = append(ops, k)
			}
			ks, err := sp.OpenKeyed(op, st.Index, st.ManagedKeyed)
			if err != nil {
				return fail(err)
			}
			k.streams = append(k.streams, ks)
		}
		if k == nil {
			continue
		}
		if err := k.unifyHeaders(); err != nil {
			return fail(err)
		}
		k.codec, k.codecErr = keytype.ForSpec(k.header.Key.Spec())
		if k.codecErr != nil {
			k.codecErr = fmt.Errorf("operator %s (keyed states %s): %w", op.Label(), k.stateNames(), k.codecErr)
		}
	}
	return ops, nil
}

// unifyHeaders picks the header with the most states and maps every
// stream's state ids onto it by name. Subtask headers are normally
// identical; a state missing from the chosen header, or the same name with
// different meta info, is refused.
func (k *keyedOp) unifyHeaders() error {
	best := k.streams[0]
	for _, s := range k.streams {
		if len(s.Header.States) > len(best.Header.States) {
			best = s
		}
	}
	k.header = best.Header
	for i, s := range k.streams {
		if s == best {
			k.streams[0], k.streams[i] = k.streams[i], k.streams[0]
			break
		}
	}
	k.remap = make([][]int, len(k.streams))
	for i, s := range k.streams {
		m := make([]int, len(s.Header.States))
		same := bytes.Equal(s.HeaderBytes, k.streams[0].HeaderBytes)
		for j, st := range s.Header.States {
			if same {
				m[j] = j
				continue
			}
			o := k.header.StateByName(st.Name)
			if o == nil || !bytes.Equal(s.HeaderBytes[st.Raw[0]:st.Raw[1]], k.streams[0].HeaderBytes[o.Raw[0]:o.Raw[1]]) {
				return fmt.Errorf("%w: operator %s: the keyed-state headers of its subtasks disagree about state %q", snapshotfmt.ErrUnsupported, k.op.Label(), JavaString(st.Name))
			}
			m[j] = o.ID
		}
		if !same && s.Header.Key.Class != k.header.Key.Class {
			return fmt.Errorf("%w: operator %s: subtasks disagree about the key serializer", snapshotfmt.ErrUnsupported, k.op.Label())
		}
		k.remap[i] = m
	}
	return nil
}

// keyStart is where the user key starts in a composite key: after the
// key-group prefix, and for timers after the 8-byte timestamp.
func keyStart(timers bool, prefix int) int {
	if timers {
		return prefix + 8
	}
	return prefix
}

// hashKey returns the Java hashCode of the key inside a composite key.
func (k *keyedOp) hashKey(st *StateMeta, key []byte, prefix int) (int32, error) {
	if k.codecErr != nil {
		return 0, k.codecErr
	}
	s := keyStart(st.IsTimers(), prefix)
	if len(key) < s {
		return 0, fmt.Errorf("%w: key %x of state %q is shorter than its prefix", snapshotfmt.ErrCorrupt, key, JavaString(st.Name))
	}
	_, h, err := keytype.LenHash(k.codec, key[s:])
	if err != nil {
		return 0, fmt.Errorf("state %q key %x: %w", JavaString(st.Name), key, err)
	}
	return h, nil
}

type xxh3Uint128 = xxh3.Uint128

// Fingerprint is an order-independent digest of a multiset of entries:
// the count and the sums of the entries' 128-bit hashes.
type Fingerprint struct {
	Entries uint64
	Lo, Hi  uint64
	Bytes   uint64
}

func (f *Fingerprint) add(h xxh3.Uint128, n int) {
	f.Entries++
	f.Lo += h.Lo
	f.Hi += h.Hi
	f.Bytes += uint64(n)
}

// Merge adds another fingerprint.
func (f *Fingerprint) Merge(o Fingerprint) {
	f.Entries += o.Entries
	f.Lo += o.Lo
	f.Hi += o.Hi
	f.Bytes += o.Bytes
}

// entryHash digests one entry independently of max parallelism: the
// composite key without its key-group prefix, and the value. Fingerprints
// are kept per operator and state, so those need not be hashed.
func entryHash(buf []byte, keyNoPrefix, value []byte) ([]byte, xxh3.Uint128) {
	buf = buf[:0]
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(keyNoPrefix)))
	buf = append(buf, keyNoPrefix...)
	buf = append(buf, value...)
	return buf, xxh3.Hash128(buf)
}

// fpKey names the fingerprint of one state of one operator.
func fpKey(op *OperatorState, state string) string { return op.IDString() + "\x00" + state }

// stateFPs are one worker's fingerprints of one operator, by state id.
type stateFPs struct {
	op  *OperatorState
	ids []*StateMeta
	fp  []Fingerprint
}

func (s *stateFPs) into(m map[string]*Fingerprint) {
	for i, f := range s.fp {
		if f.Entries == 0 {
			continue
		}
		k := fpKey(s.op, s.ids[i].Name)
		x := m[k]
		if x == nil {
			x = &Fingerprint{}
			m[k] = x
		}
		x.Merge(f)
	}
}

// sectionJob is one key-group section of one stream of a keyed operator.
type sectionJob struct {
	op     *keyedOp
	stream int
	sec    Section
}

// scanSections reads sections in parallel. fn runs on the worker's
// goroutine; worker is 0..workers-1 so fn can keep per-worker state.
func scanSections(ctx context.Context, jobs []sectionJob, workers int, fn func(worker int, j sectionJob, rd *sectionReader) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ch := make(chan sectionJob)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ch)
		for _, j := range jobs {
			select {
			case ch <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for w := 0; w < workers; w++ {
		g.Go(func() error {
			rd := &sectionReader{}
			for j := range ch {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := fn(w, j, rd); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func allSections(ops []*keyedOp) []sectionJob {
	var jobs []sectionJob
	for _, k := range ops {
		for i, s := range k.streams {
			for _, sec := range s.Sections() {
				jobs = append(jobs, sectionJob{op: k, stream: i, sec: sec})
			}
		}
	}
	return jobs
}

type fpSet struct {
	mu sync.Mutex
	m  map[string]*Fingerprint // operator id + "\x00" + state name
}

func (s *fpSet) merge(local *stateFPs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Fingerprint{}
	}
	local.into(s.m)
}
