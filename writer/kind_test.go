package writer_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

// --force replaces only what rebucket could have written: a snapshot for
// a snapshot writer. Anything else is refused before anything is written,
// and left as it was.
func TestForceReplacesOnlyOwnKind(t *testing.T) {
	parent := t.TempDir()
	mk := func(name string, files map[string]string) string {
		p := filepath.Join(parent, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(p, f), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	fifo := filepath.Join(parent, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "link")
	os.Symlink(mk("linked", map[string]string{"MANIFEST.json": `{"format":"rebucket-snapshot"}`}), link)
	file := filepath.Join(parent, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, c := range []struct {
		name, target, want string
	}{
		{"a home directory", mk("home", map[string]string{".bashrc": "x", "notes.txt": "y"}), "is not a snapshot"},
		{"another format's manifest", mk("other", map[string]string{"MANIFEST.json": `{"format":"something-else"}`}), "does not declare"},
		{"a manifest that is not JSON", mk("garbage", map[string]string{"MANIFEST.json": "not json"}), "not a JSON object"},
		{"a FIFO", fifo, "a FIFO"},
		{"a symbolic link to a snapshot", link, "a symbolic link"},
		{"a regular file", file, "a file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := fixtures.TreeHash(parent)
			if err != nil {
				t.Fatal(err)
			}
			_, err = writer.Create(c.target, header(t), writer.Options{Force: true})
			if !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want refused: %s", err, c.want)
			}
			if after, _ := fixtures.TreeHash(parent); after != before {
				t.Fatal("the refused target (or its parent) changed")
			}
		})
	}
	// A real snapshot is replaced.
	snap := filepath.Join(parent, "snap")
	if _, err := fixtures.Generate(t.Context(), snap, fixtures.Spec{Buckets: 4, Width: 2, Keys: 10}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := writer.Create(snap, header(t), writer.Options{Force: true})
	if err != nil {
		t.Fatalf("a snapshot: %v", err)
	}
	s.Abort()
}

func TestCheckReplaceFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, nil, 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(reg, link)
	for p, refuse := range map[string]bool{fifo: true, link: true, dir: true, "/dev/null": true, reg: false, filepath.Join(dir, "missing"): false} {
		err := writer.CheckReplaceFile(p)
		if refuse != (err != nil) || (err != nil && !errors.Is(err, snapshotfmt.ErrRefused)) {
			t.Errorf("%s: %v, want refused %v", p, err, refuse)
		}
	}
}

// A temporary directory whose marker names another boot is a dead run's,
// even when its pid names a live process now (pids are reused, and mean
// nothing across PID namespaces).
func TestBeginRemovesTempDirOfAnotherBoot(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "snap")
	mk := func(name, marker string) string {
		p := filepath.Join(parent, ".snap.rebucket-tmp-"+name)
		os.Mkdir(p, 0o750)
		os.WriteFile(filepath.Join(p, writer.MarkerName), []byte(marker), 0o640)
		os.WriteFile(filepath.Join(p, "000001.sst"), []byte("partial"), 0o640)
		return p
	}
	other := mk("aa", `{"run_id":"aa","pid":1,"boot_id":"00000000-0000-0000-0000-000000000000"}`)
	live := mk("bb", `{"run_id":"bb","pid":1}`) // pid 1 lives, same boot (unknown)
	s, err := writer.Begin(target, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	if len(s.Removed) != 1 || s.Removed[0] != other {
		t.Errorf("removed %v, want %s", s.Removed, other)
	}
	if len(s.Leftover) != 1 || s.Leftover[0] != live {
		t.Errorf("leftover %v, want %s", s.Leftover, live)
	}
}
