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

// loadEstimate is the memory reading a partition at version v takes: the
// table of the files it holds, twice their raw bytes (read from the lz4
// block headers, without decompressing: the arena and as much again for
// the index). A snapshot is streamed, so only the deltas above it count;
// a version of deltas alone counts whole, as it is loaded whole when its
// first delta cannot be streamed (streaming it holds far less: 8 bytes a
// row of that delta and the later deltas' table).
func loadEstimate(dir string, v int64) int64 {
	pf, err := ListPartition(dir)
	if err != nil {
		return 0
	}
	_, deltas, err := pf.Plan(v)
	if err != nil {
		return 0
	}
	// With a snapshot, only the deltas above it are held (streamRows).
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
