package spark

import (
	"context"
	"encoding/binary"
	"io"
	"os"

	"golang.org/x/sync/semaphore"

	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/plan"
)

// A store partition is streamed where it can be (streamRows: only the
// deltas above the base file are held) and otherwise loaded whole, as
// Spark's HDFS-backed provider holds it; memory is bounded by how many are
// read at once: each read first takes its estimated size from a budget;
// one larger than the whole budget runs alone.

// memGate admits partition loads within a memory budget.
type memGate struct {
	sem    *semaphore.Weighted
	budget int64
}

func newMemGate(budget int64) *memGate {
	if budget <= 0 {
		budget = plan.DefaultMemory()
	}
	return &memGate{sem: semaphore.NewWeighted(budget), budget: budget}
}

// acquire waits until a load of about need bytes fits; release with the
// returned amount.
func (g *memGate) acquire(ctx context.Context, need int64) (int64, error) {
	need = min(max(need, 1), g.budget)
	return need, g.sem.Acquire(ctx, need)
}

func (g *memGate) release(n int64) { g.sem.Release(n) }

// loadEstimate is the memory a partition's table takes at version v:
// the raw bytes of its files (read from the lz4 block headers, without
// decompressing) for the arena, as much again for the index.
func loadEstimate(dir string, v int64) int64 {
	pf, err := ListPartition(dir)
	if err != nil {
		return 0
	}
	snap, deltas, err := pf.Plan(v)
	if err != nil {
		return 0
	}
	if snap != "" {
		if len(deltas) == 0 {
			return 0 // streamed, see ForEachRow
		}
		deltas = append(deltas, snap)
	}
	var raw int64
	for _, f := range deltas {
		raw += rawSize(f)
	}
	return 2 * raw
}

// rawSize sums the raw lengths of an lz4-java stream's block headers;
// damage stops the count (the load reports it).
func rawSize(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var hdr [lz4java.HeaderLen]byte
	var raw, off int64
	for {
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			if err != io.EOF {
				return raw
			}
			return raw
		}
		clen := int64(int32(binary.LittleEndian.Uint32(hdr[9:])))
		rlen := int64(int32(binary.LittleEndian.Uint32(hdr[13:])))
		if clen < 0 || rlen < 0 {
			return raw
		}
		raw += rlen
		off += lz4java.HeaderLen + clen
	}
}

// streamEstimate is the memory streamRows takes at version v: a table of
// the deltas above the base (as loadEstimate counts them) and, when the
// base is a delta, 8 bytes of key hash per row it streams. An UnsafeRow
// record is at least 40 bytes (lengths, null bitsets, one field each in
// key and value), so raw/4 bounds the hashes with room for growing them.
func streamEstimate(pf *PartitionFiles, v int64) int64 {
	snap, deltas, err := pf.Plan(v)
	if err != nil {
		return 0
	}
	var est int64
	if snap == "" && len(deltas) > 0 {
		est = rawSize(deltas[0]) / 4
		deltas = deltas[1:]
	}
	for _, f := range deltas {
		est += 2 * rawSize(f)
	}
	return est
}
