package verify

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func loadManifest(t testing.TB, dir string) *snapshotfmt.Manifest {
	data, err := os.ReadFile(filepath.Join(dir, snapshotfmt.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshotfmt.DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reseal(t testing.TB, dir string, m *snapshotfmt.Manifest) {
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshotfmt.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Fuzz modes: what the input damages.
const (
	fuzzManifestByte   = iota // flip a byte of the manifest
	fuzzTableByte             // flip a byte of a table, manifest untouched
	fuzzTableResealed         // flip a byte in a table's first half, manifest resealed to match
	fuzzWorkerResealed        // replace a per-worker file by payload, manifest resealed
	fuzzManifestBytes         // replace the manifest by payload
	fuzzKey                   // replace a table by one entry with key payload, resealed
	fuzzModes
)

// FuzzCheck feeds damaged manifests, tables, per-worker files and keys to
// Check and Equal: never a panic; a table damaged behind the manifest's
// back is caught by its checksum and never opened.
func FuzzCheck(f *testing.F) {
	f.Add(uint8(fuzzManifestByte), uint8(0), uint32(100), uint8(1), []byte(nil))
	f.Add(uint8(fuzzTableByte), uint8(1), uint32(40), uint8(0x80), []byte(nil))
	f.Add(uint8(fuzzTableByte), uint8(2), uint32(1<<30), uint8(0xff), []byte(nil))
	f.Add(uint8(fuzzTableResealed), uint8(0), uint32(17), uint8(4), []byte(nil))
	f.Add(uint8(fuzzTableResealed), uint8(3), uint32(2000), uint8(0x10), []byte(nil))
	f.Add(uint8(fuzzWorkerResealed), uint8(0), uint32(0), uint8(0), []byte{0, 0, 0, 9, 'x'})
	f.Add(uint8(fuzzWorkerResealed), uint8(1), uint32(0), uint8(0), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(fuzzManifestBytes), uint8(0), uint32(0), uint8(0), []byte(`{"format":"rebucket-snapshot","version":1,"files":[{"path":"../x"}]}`))
	f.Add(uint8(fuzzManifestBytes), uint8(0), uint32(0), uint8(0), []byte(`{"format":"rebucket-snapshot","version":2}`))
	f.Add(uint8(fuzzKey), uint8(0), uint32(0), uint8(0), []byte{0, 0, 0, 1, 0, 1, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add(uint8(fuzzKey), uint8(1), uint32(0), uint8(0), []byte{0, 0, 0, 1, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(fuzzKey), uint8(2), uint32(0), uint8(0), []byte{0xff, 0xff, 0xff, 0xff, 0, 9})
	template := filepath.Join(f.TempDir(), "template")
	if _, err := fixtures.Generate(context.Background(), template, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mode, file uint8, off uint32, xor uint8, payload []byte) {
		dir := filepath.Join(t.TempDir(), "snap")
		copyTree(t, template, dir)
		m := loadManifest(t, dir)
		df := &m.Files[int(file)%len(m.Files)]
		tablePath := filepath.Join(dir, filepath.FromSlash(df.Path))
		flip := func(p string, limit int) bool {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if limit <= 0 || xor == 0 {
				return false
			}
			data[int(off)%limit] ^= xor
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return true
		}
		checkedTable := false
		switch mode % fuzzModes {
		case fuzzManifestByte:
			data, _ := os.ReadFile(filepath.Join(dir, snapshotfmt.ManifestName))
			flip(filepath.Join(dir, snapshotfmt.ManifestName), len(data))
		case fuzzTableByte:
			checkedTable = flip(tablePath, int(df.Size))
		case fuzzTableResealed:
			if flip(tablePath, int(df.Size)/2) {
				data, _ := os.ReadFile(tablePath)
				df.Checksum = snapshotfmt.Checksum(data)
				reseal(t, dir, m)
			}
		case fuzzWorkerResealed:
			wf := &m.WorkerStates[0].Files[int(file)%len(m.WorkerStates[0].Files)]
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(wf.Path)), payload, 0o644); err != nil {
				t.Fatal(err)
			}
			wf.Size, wf.Checksum = int64(len(payload)), snapshotfmt.Checksum(payload)
			if uint64(wf.Size) < 4*wf.Items {
				wf.Items = uint64(wf.Size) / 4
			}
			reseal(t, dir, m)
		case fuzzManifestBytes:
			if err := os.WriteFile(filepath.Join(dir, snapshotfmt.ManifestName), payload, 0o644); err != nil {
				t.Fatal(err)
			}
		case fuzzKey:
			data, err := fixtures.WriteTableRaw([][2][]byte{{payload, {xor}}})
			if err != nil {
				return // Pebble's writer refuses the key; nothing to read
			}
			if err := os.WriteFile(tablePath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			df.Size, df.Checksum = int64(len(data)), snapshotfmt.Checksum(data)
			reseal(t, dir, m)
		}
		var fs []Finding
		sum, err := Check(context.Background(), dir, Options{Deep: DeepOn, Width: int(file)}, collect(&fs))
		if err == nil && sum == nil {
			t.Fatal("no summary")
		}
		if checkedTable {
			caught, opened := false, false
			for _, f := range fs {
				if f.File == df.Path {
					caught = caught || f.Kind == FileChecksum
					opened = opened || f.Kind == TableCorrupt
				}
			}
			if !caught || opened {
				t.Fatalf("flipped table byte: checksum caught=%v, table opened=%v:\n%s", caught, opened, lines(fs))
			}
		}
		// Equal against the sound template must not panic either, and must
		// not claim equality of a damaged snapshot.
		damaged := false
		for _, f := range fs {
			damaged = damaged || (f.Severity == SevError && f.Kind != WidthAboveBuckets)
		}
		es, err := Equal(context.Background(), dir, template, EqualOptions{}, nil)
		if err == nil && es.Equal && damaged {
			t.Fatalf("Equal says equal, Check found:\n%s", lines(fs))
		}
	})
}
