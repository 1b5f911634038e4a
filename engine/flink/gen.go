package flink

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// The generator writes canonical savepoints of the probe job
// (interop/flink, probe.Probe) at sizes Flink is too slow to produce here.
// Its templates are real Flink 2.3.0 bytes: the _metadata of a heap
// canonical savepoint (operators, uids, ids, the source's inline operator
// state, the Java-serialized CheckpointProperties) and the keyed-state
// headers of its two keyed operators. The generator replaces the keyed
// handles and writes the entries the probe job would hold after one pass
// over keys 0..Keys-1.

//go:embed gentemplate/_metadata
var genMetadata []byte

//go:embed gentemplate/str-counter.header
var genStrHeader []byte

//go:embed gentemplate/long-agg.header
var genLongHeader []byte

// longKeyShift: the probe's long-agg key is i-100 (probe.Probe.LONG_KEY_SHIFT),
// so negative keys exercise Long.hashCode's sign handling.
const longKeyShift = 100

// GenerateOptions size a generated savepoint.
type GenerateOptions struct {
	// Keys per keyed operator (str-counter: "k0".."k<Keys-1>", long-agg:
	// Long keys i-100, as probe.Probe).
	Keys int
	// MaxParallelism of every operator (default 8).
	MaxParallelism int
	// Parallelism of the keyed operators: one keyed-state file each
	// (default 2).
	Parallelism int
	// Compressed writes Snappy-framed key groups.
	Compressed bool
}

// Generate writes a canonical savepoint into the new directory dir. Per
// key i: str-counter holds ValueState "count" = 1 and an event-time timer
// at -1000-i; long-agg holds MapState "tags" {"t"+(i%3): 1}, ListState
// "events" [i] and an event-time timer at 1000000+key. Operator "src"
// keeps its ListState "offset" from the template.
func Generate(dir string, opts GenerateOptions) error {
	if opts.MaxParallelism == 0 {
		opts.MaxParallelism = 8
	}
	if opts.Parallelism == 0 {
		opts.Parallelism = 2
	}
	m, p := opts.MaxParallelism, opts.Parallelism
	if m < 1 || m > keytype.MaxParallelismUpperBound || p < 1 || p > m || opts.Keys < 0 {
		return fmt.Errorf("%w: generate %d keys, max parallelism %d, parallelism %d", snapshotfmt.ErrInvalidArgument, opts.Keys, m, p)
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%w: %s exists", snapshotfmt.ErrRefused, dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	md, err := DecodeMetadata(genMetadata)
	if err != nil {
		return fmt.Errorf("generator template: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(filepath.Clean(dir)), fsx.TempName(TempPrefix))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// Keys bucketed by key group (counting sort of key indices), per
	// operator: the generator writes key group by key group.
	n := opts.Keys
	strKG := make([]int32, n)
	longKG := make([]int32, n)
	var sbuf []byte
	for i := 0; i < n; i++ {
		sbuf = fmt.Appendf(sbuf[:0], "k%d", i)
		strKG[i] = int32(keytype.KeyGroup(keytype.StringHashCode(string(sbuf)), m))
		v := int64(i) - longKeyShift
		longKG[i] = int32(keytype.KeyGroup(int32(uint64(v)^uint64(v)>>32), m))
	}
	strIdx, strStart := bucket(strKG, m)
	longIdx, longStart := bucket(longKG, m)
	w := keytype.PrefixBytes(m)

	type job struct {
		uid    string
		header []byte
		sub    int
	}
	var jobs []job
	for s := 0; s < p; s++ {
		jobs = append(jobs, job{"str-counter", genStrHeader, s}, job{"long-agg", genLongHeader, s})
	}
	handles := make([]*KeyedHandle, len(jobs))
	var g errgroup.Group
	g.SetLimit(4)
	for ji, j := range jobs {
		g.Go(func() error {
			hdr := append([]byte(nil), j.header...)
			if opts.Compressed {
				hdr[4] = 1
			}
			lo, hi := keytype.KeyGroupRange(j.sub, m, p)
			name := fmt.Sprintf("gen-%s-%d", j.uid, j.sub)
			f, err := os.Create(filepath.Join(tmp, name))
			if err != nil {
				return err
			}
			defer f.Close()
			sw, err := NewStreamWriter(f, hdr, lo, hi-lo+1)
			if err != nil {
				return err
			}
			var key, val []byte
			prefix := func(kg int) []byte {
				key = key[:0]
				if w == 2 {
					return binary.BigEndian.AppendUint16(key, uint16(kg))
				}
				return append(key, byte(kg))
			}
			for kg := lo; kg <= hi; kg++ {
				if j.uid == "str-counter" {
					keys := strIdx[strStart[kg]:strStart[kg+1]]
					if len(keys) == 0 {
						continue
					}
					if err := sw.StartKeyGroup(kg); err != nil {
						return err
					}
					// State ids of the template header: 0 count, 2 event timers.
					for _, i := range keys {
						key = appendStringKey(prefix(kg), int(i))
						key = append(key, 0) // VoidNamespace
						val = binary.BigEndian.AppendUint64(val[:0], 1)
						if err := sw.Add(0, key, val); err != nil {
							return err
						}
					}
					for _, i := range keys {
						key = binary.BigEndian.AppendUint64(prefix(kg), uint64(-1000-int64(i))^1<<63)
						key = appendStringKey(key, int(i))
						key = append(key, 0)
						if err := sw.Add(2, key, nil); err != nil {
							return err
						}
					}
					continue
				}
				keys := longIdx[longStart[kg]:longStart[kg+1]]
				if len(keys) == 0 {
					continue
				}
				if err := sw.StartKeyGroup(kg); err != nil {
					return err
				}
				// Template header: 0 events (LIST), 1 tags (MAP), 3 event timers.
				for _, i := range keys {
					key = binary.BigEndian.AppendUint64(prefix(kg), uint64(int64(i)-longKeyShift))
					key = append(key, 0)
					val = binary.BigEndian.AppendUint64(val[:0], uint64(i))
					if err := sw.Add(0, key, val); err != nil {
						return err
					}
				}
				for _, i := range keys {
					key = binary.BigEndian.AppendUint64(prefix(kg), uint64(int64(i)-longKeyShift))
					key = append(key, 0, 3, 't', byte('0'+i%3))
					val = binary.BigEndian.AppendUint64(append(val[:0], 0), 1)
					if err := sw.Add(1, key, val); err != nil {
						return err
					}
				}
				for _, i := range keys {
					k := int64(i) - longKeyShift
					key = binary.BigEndian.AppendUint64(prefix(kg), uint64(1000000+k)^1<<63)
					key = binary.BigEndian.AppendUint64(key, uint64(k))
					key = append(key, 0)
					if err := sw.Add(3, key, nil); err != nil {
						return err
					}
				}
			}
			offsets, size, err := sw.Finish()
			if err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			handles[ji] = &KeyedHandle{StartKeyGroup: int32(lo), Offsets: offsets, Delegate: &StreamHandle{Type: handleRelativeFile, Path: name, Size: size}}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, op := range md.Operators {
		op.MaxParallelism = int32(m)
		if op.UID == "src" {
			// The source's ListState "offset" holds one Long, the number
			// of records emitted: the template's last 8 inline bytes.
			h := op.Subtasks[0].ManagedOperator.Delegate
			h.Data = binary.BigEndian.AppendUint64(append([]byte(nil), h.Data[:len(h.Data)-8]...), uint64(n))
		}
		var mine []*KeyedHandle
		for ji, j := range jobs {
			if j.uid == op.UID {
				mine = append(mine, handles[ji])
			}
		}
		if mine == nil {
			continue
		}
		op.Parallelism = int32(p)
		op.Subtasks = nil
		for s, h := range mine {
			op.Subtasks = append(op.Subtasks, &SubtaskState{Index: int32(s), ManagedKeyed: h})
		}
	}
	b, err := md.Encode()
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, MetadataFile), b); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// appendStringKey appends "k<i>" in Flink's StringValue format (ASCII:
// varint length+1, one byte per char).
func appendStringKey(b []byte, i int) []byte {
	var d [24]byte
	s := fmt.Appendf(d[:0], "k%d", i)
	b = append(b, byte(len(s)+1))
	return append(b, s...)
}

// bucket returns key indices ordered by key group and the start of each
// key group's run (start has m+1 entries).
func bucket(kgs []int32, m int) ([]int32, []int) {
	start := make([]int, m+1)
	for _, g := range kgs {
		start[g+1]++
	}
	for i := 1; i <= m; i++ {
		start[i] += start[i-1]
	}
	pos := append([]int(nil), start[:m]...)
	idx := make([]int32, len(kgs))
	for i, g := range kgs {
		idx[pos[g]] = int32(i)
		pos[g]++
	}
	return idx, start
}
