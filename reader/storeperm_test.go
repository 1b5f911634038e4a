package reader_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
)

// The worker stores are created 0750/0640 before the umask, as every
// output of the tools, not with Pebble's 0755/0666. With the umask cleared
// the mode of everything in a store is what was asked for.
func TestBuildStorePermissions(t *testing.T) {
	s, _ := genSnapshot(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 400})
	l, err := s.NewLoader(3, reader.PolicyReject)
	if err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := l.BuildStore(context.Background(), 1, dir); err != nil {
		t.Fatal(err)
	}
	// Opening the store again makes Pebble write a new manifest, WAL and
	// OPTIONS file.
	db, err := reader.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var dirs, files int
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch perm := info.Mode().Perm(); {
		case d.IsDir():
			dirs++
			if perm&^0o750 != 0 {
				t.Errorf("directory %s is %o, want within 0750", p, perm)
			}
		default:
			files++
			if perm&^0o640 != 0 {
				t.Errorf("file %s is %o, want within 0640", p, perm)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dirs < 2 || files < 4 {
		t.Fatalf("walked %d directories and %d files: no store?", dirs, files)
	}
}
