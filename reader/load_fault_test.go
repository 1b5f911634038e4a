package reader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// buildAll builds every worker of a load at width w (clip mode c) and
// returns the first error; a panic fails the test with its value.
func buildAll(t *testing.T, dir string, w int, c reader.ClipMode, opts reader.BuildOptions) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("load panicked: %v\n%s", p, debug.Stack())
		}
	}()
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return err
	}
	l, err := s.NewLoader(w, reader.PolicyReject)
	if err != nil {
		return err
	}
	opts.Clip = c
	var total uint64
	for i := range w {
		wd := filepath.Join(t.TempDir(), "w")
		if _, err := l.BuildStoreWith(context.Background(), i, wd, opts); err != nil {
			return err
		}
		c, err := l.CheckStoreWith(context.Background(), i, wd, opts)
		if err != nil {
			return err
		}
		if c.Outside != 0 {
			t.Fatalf("worker %d holds %d entries outside its buckets", i, c.Outside)
		}
		total += c.Entries
	}
	if total != s.Manifest().TotalEntries() {
		t.Fatalf("a load that succeeded holds %d entries, the snapshot %d", total, s.Manifest().TotalEntries())
	}
	return nil
}

// Tables that a point iteration of Pebble reads without complaint, and a
// data block flipped behind a resealed manifest, never reach a store:
// load refuses them as damage naming the file, whether the file is
// ingested whole (W=1), clipped (W=3) or excised.
func TestLoadRefusesDamagedTables(t *testing.T) {
	damages := append([]fixtures.Damage{"flipped-data-block"}, fixtures.TableDamages...)
	for _, d := range damages {
		t.Run(string(d), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap")
			if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
				t.Fatal(err)
			}
			want := tableDamageWant[d]
			if d == "flipped-data-block" {
				// Inside the first data block, past its first key's
				// header; the manifest resealed so the whole-file
				// checksum matches and the damage reaches the table
				// reader (before the fix: "panic: on-disk corruption").
				flip(t, filepath.Join(dir, "data"), 0, 100)
				if err := fixtures.Reseal(dir); err != nil {
					t.Fatal(err)
				}
				want = "checksum"
			} else if err := fixtures.ApplyTable(context.Background(), dir, d); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				w    int
				clip reader.ClipMode
			}{{1, reader.ClipRewrite}, {3, reader.ClipRewrite}, {3, reader.ClipExcise}} {
				err := buildAll(t, dir, tc.w, tc.clip, reader.BuildOptions{})
				if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "data/") {
					t.Errorf("W=%d %s: %v, want ErrCorrupt naming the file and saying %q", tc.w, tc.clip, err, want)
				}
			}
		})
	}
}

// flip flips one byte at offset off of the k-th file (by name) in dir.
func flip(t *testing.T, dir string, k int, off int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, ents[k].Name())
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x5a
	// Write a new file: the old one may be hard-linked from a store.
	os.Remove(p)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Damage in a built store (a byte flipped in one of its tables) is found
// by the read-back as ErrCorrupt. Before the fix Pebble's default
// corruption listener called Fatalf: "panic: on-disk corruption".
func TestCheckStoreFindsDamagedStore(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 4, Width: 1, Keys: 300})
	l, err := s.NewLoader(1, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(t.TempDir(), "w")
	if _, err := l.BuildStore(context.Background(), 0, wd); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(wd, reader.StoreDir)
	ents, _ := os.ReadDir(store)
	k := -1
	for i, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no table in the store")
	}
	flip(t, store, k, 100)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("CheckStore panicked: %v", p)
			}
		}()
		_, err = l.CheckStore(context.Background(), 0, wd)
	}()
	if !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("CheckStore of a damaged store: %v, want ErrCorrupt", err)
	}
}

// A full disk under Pebble's own writes (its MANIFEST, WAL, OPTIONS,
// ingested and clipped tables), injected through Pebble's vfs at every
// write operation of a load in turn: each run fails with ENOSPC (a
// failure while working, not damage), never a panic. Before the fix a
// failed MANIFEST write ended the process: "panic: MANIFEST flush failed".
func TestLoadFullDiskInPebble(t *testing.T) {
	_, dir := genSnapshot(t, fixtures.Spec{Buckets: 4, Width: 1, Keys: 300})
	// Every write of a load at width 3 that lands on a MANIFEST, then
	// every write of any kind at width 1.
	for _, tc := range []struct {
		only  string
		width int
	}{{"MANIFEST", 3}, {"", 1}} {
		only := tc.only
		failed, manifestFailed := 0, 0
		for n := int64(1); ; n++ {
			var count, fired atomic.Int64
			var firedPath atomic.Value
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || !strings.Contains(op.Path, only) {
					return nil
				}
				if count.Add(1) == n {
					fired.Add(1)
					firedPath.Store(op.Path)
					return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
				}
				return nil
			})
			fs := errorfs.Wrap(vfs.Default, inj)
			err := buildAll(t, dir, tc.width, reader.ClipRewrite, reader.BuildOptions{StoreFS: fs})
			if fired.Load() == 0 {
				if err != nil {
					t.Fatalf("%q #%d: no fault injected, yet %v", only, n, err)
				}
				break
			}
			if err == nil {
				// Pebble may ignore a failed removal or a sync of a
				// file it no longer needs; nothing may be lost.
				continue
			}
			failed++
			if strings.Contains(fmt.Sprint(firedPath.Load()), "MANIFEST") {
				manifestFailed++
			}
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Errorf("%q write #%d (%v) failed: %v, want ENOSPC, not damage", only, n, firedPath.Load(), err)
			}
		}
		t.Logf("writes matching %q: %d faulted runs failed with ENOSPC (%d at a MANIFEST write)", only, failed, manifestFailed)
		if manifestFailed == 0 {
			t.Errorf("%q: no fault landed on a MANIFEST write", only)
		}
	}
}

// An I/O error under Pebble's reads of a store during the read-back is a
// failure to read (EIO kept, exit 4), not damage.
func TestCheckStoreReadErrorIsNotDamage(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 4, Width: 1, Keys: 300})
	l, err := s.NewLoader(1, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(t.TempDir(), "w")
	if _, err := l.BuildStore(context.Background(), 0, wd); err != nil {
		t.Fatal(err)
	}
	var fired atomic.Int64
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsRead && strings.HasSuffix(op.Path, ".sst") && op.Kind != errorfs.OpOpen && op.Kind != errorfs.OpStat {
			fired.Add(1)
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	}))
	_, err = l.CheckStoreWith(context.Background(), 0, wd, reader.BuildOptions{StoreFS: fs})
	if fired.Load() == 0 {
		t.Fatal("no read was faulted")
	}
	if !errors.Is(err, syscall.EIO) || errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("read-back under EIO: %v, want EIO, not damage", err)
	}
}
