package writer_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// BenchmarkSSTableEncode measures BucketWriter.Add, the per-entry cost of
// writing a snapshot (order check, stats, Pebble block building and
// compression), per compression. One op is one entry; -benchmem shows the
// allocations of the per-entry path.
func BenchmarkSSTableEncode(b *testing.B) {
	const n = 1 << 14
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = snapshotfmt.EncodeKey(0, 1, fmt.Appendf(nil, "user-%09d", i), nil)
	}
	value := make([]byte, 64)
	for i := range value {
		value[i] = byte(i * 7)
	}
	for _, comp := range []string{"snappy", "zstd", "none"} {
		b.Run(comp, func(b *testing.B) {
			part, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 1<<16)
			s, err := writer.Create(filepath.Join(b.TempDir(), "snap"), writer.Header{
				Partitioning: part, WidthAtWrite: 1,
				States: []snapshotfmt.State{{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue}},
			}, writer.Options{Compression: comp})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Abort()
			bw := s.NewBucketWriter()
			defer bw.Abort()
			b.SetBytes(int64(len(keys[0]) + len(value)))
			b.ReportAllocs()
			key := make([]byte, len(keys[0]))
			for i := 0; b.Loop(); i++ {
				// Bucket i/n, key i%n: strictly increasing across the loop.
				copy(key, keys[i%n])
				snapshotfmt.WithBucket(key, uint32(i/n))
				if err := bw.Add(key, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBackgroundSyncFailureFailsCommit: data files are fsynced in the
// background (a tuning of issue 7); a failed fsync must still fail Commit,
// leave no target and remove the temporary directory.
func TestBackgroundSyncFailureFailsCommit(t *testing.T) {
	for _, after := range []int{0, 3} {
		t.Run(fmt.Sprintf("after-%d", after), func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "snap")
			fs := &fsx.Faulty{Fault: fsx.Fault{Op: fsx.OpSync, Path: ".sst", Err: syscall.EIO, After: after}}
			part, _ := snapshotfmt.NewPartitioning(snapshotfmt.MappingMod, 16)
			s, err := writer.Create(target, writer.Header{
				Partitioning: part, WidthAtWrite: 1,
				States: []snapshotfmt.State{{ID: 1, Step: "s", Name: "v", Kind: snapshotfmt.KindValue}},
			}, writer.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			// One writer per bucket: 16 files, so syncs overlap.
			for b := range uint32(16) {
				bw := s.NewBucketWriter()
				if err := bw.Add(snapshotfmt.EncodeKey(b, 1, []byte("k"), nil), []byte("v")); err != nil {
					t.Fatal(err)
				}
				if err := bw.Close(); err != nil {
					t.Fatalf("close: %v (fsync errors surface at Commit)", err)
				}
			}
			if _, err := s.Commit(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Commit: %v, want the fsync error", err)
			}
			if fs.Hits.Load() == 0 {
				t.Fatal("no fsync failed")
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("target after a failed commit: %v", err)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
}
