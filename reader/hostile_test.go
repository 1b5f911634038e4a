package reader_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Hostile input beyond the damage table (fixtures.Damages): links out of
// the snapshot, absurd numbers, an oversized manifest, crafted tables. Each
// is refused with ErrCorrupt or ErrTooLarge and allocates little: the
// numbers in a manifest are never trusted for an allocation.

func hostileSnapshot(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := fixtures.Generate(context.Background(), dir, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// allocated runs f and returns the bytes it allocated on the Go heap.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// readEverything opens every data file and worker file and reads every entry,
// returning the first error.
func readEverything(dir string) error {
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return err
	}
	m := s.Manifest()
	for _, df := range m.Files {
		fi, err := s.OpenFile(context.Background(), df, nil, nil)
		if err != nil {
			return err
		}
		for fi.Next() {
		}
		err = fi.Err()
		fi.Close()
		if err != nil {
			return err
		}
	}
	for _, ws := range m.WorkerStates {
		for _, wf := range ws.Files {
			if _, err := s.ReadWorkerFile(wf); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestHostileSymlinks(t *testing.T) {
	cases := []struct {
		name string
		// link replaces one entry by a symlink to a copy outside the
		// snapshot (so following it would pass every check).
		link func(t *testing.T, dir string, m *snapshotfmt.Manifest) string
	}{
		{"data file", func(t *testing.T, dir string, m *snapshotfmt.Manifest) string { return m.Files[1].Path }},
		{"data directory", func(t *testing.T, dir string, m *snapshotfmt.Manifest) string { return snapshotfmt.DataDir }},
		{"worker file", func(t *testing.T, dir string, m *snapshotfmt.Manifest) string {
			return m.WorkerStates[0].Files[0].Path
		}},
		{"workers directory", func(t *testing.T, dir string, m *snapshotfmt.Manifest) string { return snapshotfmt.WorkersDir }},
		{"manifest", func(t *testing.T, dir string, m *snapshotfmt.Manifest) string { return snapshotfmt.ManifestName }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := hostileSnapshot(t)
			m := readManifestFile(t, dir)
			rel := c.link(t, dir, m)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.Rename(p, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			err := readEverything(dir)
			if err == nil {
				t.Fatalf("a snapshot whose %s is a symlink out of it was read", rel)
			}
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			if !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("error does not say why: %v", err)
			}
		})
	}
}

func TestHostileManifestNumbers(t *testing.T) {
	const huge = uint64(1) << 62
	cases := []struct {
		name string
		edit func(m *snapshotfmt.Manifest)
		// raw edits the encoded manifest (for numbers its types cannot
		// hold); the self-checksum then no longer matches either.
		raw      func(data []byte) []byte
		openOK   bool // the manifest is consistent; the data refutes it
		wantText string
	}{
		{name: "bucket count 0", edit: func(m *snapshotfmt.Manifest) {
			m.Partitioning.Buckets, m.BucketEntries, m.BucketBytes = 0, []uint64{}, []uint64{}
		}, wantText: "partitioning.buckets 0"},
		{name: "bucket count 65537", edit: func(m *snapshotfmt.Manifest) {
			m.Partitioning.Buckets = 65537
		}, wantText: "partitioning.buckets 65537"},
		{name: "bucket count 2^40", raw: func(data []byte) []byte {
			return bytes.Replace(data, []byte(`"buckets": 8`), []byte(`"buckets": 1099511627776`), 1)
		}, wantText: "buckets"},
		{name: "bucket_entries of 2^20 elements", edit: func(m *snapshotfmt.Manifest) {
			m.BucketEntries = make([]uint64, 1<<20)
		}, wantText: "one per bucket"},
		{name: "file larger than the file", edit: func(m *snapshotfmt.Manifest) {
			m.Files[0].Size = 1 << 40
		}, openOK: true, wantText: "bytes, the manifest says 1099511627776"},
		{name: "worker file larger than the file", edit: func(m *snapshotfmt.Manifest) {
			m.WorkerStates[0].Files[0].Size = 1 << 40
		}, openOK: true, wantText: "bytes, the manifest says 1099511627776"},
		{name: "entry count 2^62", edit: func(m *snapshotfmt.Manifest) {
			d := huge - m.Files[0].Entries
			m.Files[0].Entries += d
			m.BucketEntries[m.Files[0].BucketLo] += d
			m.States[0].Entries += d
		}, openOK: true, wantText: "the manifest says 4611686018427387904"},
		{name: "entry counts overflow", edit: func(m *snapshotfmt.Manifest) {
			m.Files[0].Entries = huge
			m.Files[1].Entries = huge
			m.Files[2].Entries = huge
			m.Files[3].Entries = huge
		}, wantText: "overflow"},
		{name: "worker items 2^62", edit: func(m *snapshotfmt.Manifest) {
			m.WorkerStates[0].Files[0].Items = huge
		}, openOK: true, wantText: "the manifest says 4611686018427387904"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := hostileSnapshot(t)
			mp := filepath.Join(dir, snapshotfmt.ManifestName)
			if c.edit != nil {
				m := readManifestFile(t, dir)
				c.edit(m)
				writeManifestFile(t, dir, m)
			}
			if c.raw != nil {
				data, err := os.ReadFile(mp)
				if err != nil {
					t.Fatal(err)
				}
				ed := c.raw(data)
				if bytes.Equal(ed, data) {
					t.Fatal("raw edit changed nothing")
				}
				if err := os.WriteFile(mp, ed, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var openErr, err error
			n := allocated(func() {
				_, openErr = reader.Open(dir, reader.Options{})
				err = readEverything(dir)
			})
			if c.openOK != (openErr == nil) {
				t.Fatalf("Open: %v (want it to succeed: %v)", openErr, c.openOK)
			}
			if err == nil {
				t.Fatal("read without error")
			}
			if !errors.Is(err, snapshotfmt.ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			if !strings.Contains(err.Error(), c.wantText) {
				t.Errorf("error %q does not say %q", err, c.wantText)
			}
			// The snapshot is about 100 KiB: reading it costs a few MiB
			// whatever numbers its manifest claims. Only the manifest's
			// own size (bounded at 64 MiB) scales what decoding costs:
			// opening twice stays within 64 times its size.
			limit := uint64(64 << 20)
			if st, err := os.Stat(mp); err == nil {
				limit = max(limit, 64*uint64(st.Size()))
			}
			if n > limit {
				t.Errorf("allocated %d MiB", n>>20)
			}
		})
	}
}

// TestHostileManifestSize: a 100 MB manifest is refused by its size,
// without being read.
func TestHostileManifestSize(t *testing.T) {
	dir := hostileSnapshot(t)
	mp := filepath.Join(dir, snapshotfmt.ManifestName)
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	// Valid JSON throughout: the manifest padded with 100 MB of spaces.
	f, err := os.OpenFile(mp, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	pad := bytes.Repeat([]byte(" "), 1<<20)
	for range 100 {
		if _, err := f.Write(pad); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	_ = data
	var openErr error
	n := allocated(func() { _, openErr = reader.Open(dir, reader.Options{}) })
	if !errors.Is(openErr, snapshotfmt.ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", openErr)
	}
	if n > 1<<20 {
		t.Errorf("refusing a 100 MB manifest allocated %d KiB", n>>10)
	}
}

// craftFooter rewrites a Pebblev4 table's footer handles (metaindex,
// index) to the given ones; the table's block checksums are untouched.
func craftFooter(t *testing.T, data []byte, metaOff, metaLen, idxOff, idxLen uint64) []byte {
	t.Helper()
	const footerLen = 53 // 1 + 2*20 + version 4 + magic 8 (rocksdb/pebble)
	out := append([]byte(nil), data...)
	foot := out[len(out)-footerLen:]
	body := foot[1 : footerLen-12]
	clear(body)
	n := binary.PutUvarint(body, metaOff)
	n += binary.PutUvarint(body[n:], metaLen)
	n += binary.PutUvarint(body[n:], idxOff)
	binary.PutUvarint(body[n:], idxLen)
	return out
}

// footerHandles decodes the footer handles of a Pebblev4 table.
func footerHandles(t *testing.T, data []byte) (metaOff, metaLen, idxOff, idxLen uint64) {
	t.Helper()
	b := data[len(data)-53+1:]
	var n int
	var vals [4]uint64
	for i := range vals {
		v, m := binary.Uvarint(b[n:])
		if m <= 0 {
			t.Fatal("footer does not decode")
		}
		vals[i], n = v, n+m
	}
	return vals[0], vals[1], vals[2], vals[3]
}

// TestHostileCraftedTable: a table whose footer claims huge block lengths.
// Unsealed, the whole-file checksum refuses it before Pebble opens it.
// Resealed (a matching checksum, as an attacker who can write the
// manifest would make it), our own footer check refuses a handle outside
// the file; without that check, Pebble's bound (offset+length <= size)
// overflows and it callocs the claimed length (see the child run below).
func TestHostileCraftedTable(t *testing.T) {
	var big = uint64(1) << 40
	for _, c := range []struct {
		name    string
		reseal  bool
		handles func(size, mo, ml, io, il uint64) [4]uint64
		want    string
	}{
		{"index length 2^40, checksum not matching", false,
			func(size, mo, ml, io, il uint64) [4]uint64 { return [4]uint64{mo, ml, io, big} }, "checksum"},
		{"index length 2^40, resealed", true,
			func(size, mo, ml, io, il uint64) [4]uint64 { return [4]uint64{mo, ml, io, big} }, "index block handle"},
		{"metaindex offset+length wraps to inside the file, resealed", true,
			func(size, mo, ml, io, il uint64) [4]uint64 { return [4]uint64{-big + 16, big, io, il} }, "metaindex block handle"},
		{"index offset+length wraps, resealed", true,
			func(size, mo, ml, io, il uint64) [4]uint64 { return [4]uint64{mo, ml, 1 << 63, 1 << 63} }, "index block handle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := hostileSnapshot(t)
			m := readManifestFile(t, dir)
			df := &m.Files[0]
			p := filepath.Join(dir, filepath.FromSlash(df.Path))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			mo, ml, io, il := footerHandles(t, data)
			h := c.handles(uint64(len(data)), mo, ml, io, il)
			data = craftFooter(t, data, h[0], h[1], h[2], h[3])
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.reseal {
				df.Checksum = snapshotfmt.Checksum(data)
				writeManifestFile(t, dir, m)
			}
			var err2 error
			n := allocated(func() { err2 = readEverything(dir) })
			if !errors.Is(err2, snapshotfmt.ErrCorrupt) || !strings.Contains(err2.Error(), c.want) {
				t.Fatalf("want ErrCorrupt naming %q, got %v", c.want, err2)
			}
			if n > 64<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
		})
	}
}

// TestHostileCraftedTableInPebble records what Pebble itself does with a
// resealed table whose metaindex handle wraps around (offset 2^64-2^40+16,
// length 2^40: the sum, 16, passes Pebble's bound): it is opened in a
// child process straight through sstable.NewReader, bypassing our footer
// check, because a failed calloc there kills the process.
func TestHostileCraftedTableInPebble(t *testing.T) {
	if os.Getenv("REBUCKET_PEBBLE_CHILD") != "" {
		pebbleChild(t, os.Getenv("REBUCKET_PEBBLE_CHILD"))
		return
	}
	dir := hostileSnapshot(t)
	m := readManifestFile(t, dir)
	p := filepath.Join(dir, filepath.FromSlash(m.Files[0].Path))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, io, il := footerHandles(t, data)
	var big = uint64(1) << 40
	if err := os.WriteFile(p, craftFooter(t, data, -big+16, big, io, il), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileCraftedTableInPebble$", "-test.v")
	cmd.Env = append(os.Environ(), "REBUCKET_PEBBLE_CHILD="+p)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "pebble: read") {
		t.Errorf("Pebble read the crafted table:\n%s", out)
	}
	t.Logf("Pebble on a table whose metaindex claims 2^40 bytes: child exit %v; output:\n%s", cmd.ProcessState, firstLines(string(out), 8))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func pebbleChild(t *testing.T, p string) {
	f, err := vfs.Default.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := sstable.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(context.Background(), rd, sstable.ReaderOptions{})
	if err != nil {
		fmt.Printf("pebble: NewReader error: %v\n", err)
		return
	}
	defer r.Close()
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		fmt.Printf("pebble: NewIter error: %v\n", err)
		return
	}
	n := 0
	for kv := it.First(); kv != nil; kv = it.Next() {
		n++
	}
	fmt.Printf("pebble: read %d entries, iterator error %v\n", n, it.Error())
	it.Close()
}
