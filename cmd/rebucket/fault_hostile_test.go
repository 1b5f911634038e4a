package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/internal/extsort"
	"github.com/rebucket/rebucket/internal/fsx"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

// Fault injection: each file operation of the writer, the spill and the
// loader fails once (no space left on write, fsync or rename; EIO on
// reading a source file). Each must give an error naming the operation
// and the file, remove its temporary files, leave no target, and exit 4.

// checkFault asserts what a failed run must leave and say.
func checkFault(t *testing.T, err error, ffs *fsx.Faulty, parent string, allowed ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error (fault injected %d times)", ffs.Hits.Load())
	}
	if ffs.Hits.Load() == 0 {
		t.Fatalf("the fault was never hit; the run failed otherwise: %v", err)
	}
	if !errors.Is(err, ffs.Fault.Err) {
		t.Errorf("error does not wrap %v: %v", ffs.Fault.Err, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, string(ffs.Fault.Op)) && !(ffs.Fault.Op == fsx.OpRename && strings.Contains(msg, "exchange")) {
		t.Errorf("error does not name the operation %q: %v", ffs.Fault.Op, err)
	}
	// Writers run concurrently, so several may hit the fault; the error
	// returned is one of theirs and must name its file.
	named := false
	for _, p := range ffs.Paths {
		named = named || strings.Contains(msg, filepath.Base(p))
	}
	if !named {
		t.Errorf("error names none of the failed files %v: %v", ffs.Paths, err)
	}
	if code := exitCode(context.Background(), err); code != exitFailure {
		t.Errorf("exit code %d, want %d (failure while working): %v", code, exitFailure, err)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		ok := false
		for _, a := range allowed {
			ok = ok || e.Name() == a
		}
		if !ok {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestFaultsWriter(t *testing.T) {
	for _, c := range []fsx.Fault{
		{Op: fsx.OpWrite, Path: "/data/", Err: syscall.ENOSPC, After: 2},
		{Op: fsx.OpSync, Path: "/data/", Err: syscall.ENOSPC},
		{Op: fsx.OpWrite, Path: "/workers/", Err: syscall.ENOSPC},
		{Op: fsx.OpWrite, Path: "MANIFEST.json", Err: syscall.ENOSPC},
		{Op: fsx.OpSync, Path: "MANIFEST.json", Err: syscall.ENOSPC},
		{Op: fsx.OpSync, Path: "/data$", Err: syscall.EIO}, // the data directory's fsync at commit
		{Op: fsx.OpRename, Path: "/out", Err: syscall.ENOSPC},
		{Op: fsx.OpCreate, Path: "/data/", Err: syscall.ENOSPC, After: 3},
	} {
		t.Run(fmt.Sprintf("%s %s %v", c.Op, c.Path, c.Err), func(t *testing.T) {
			parent := t.TempDir()
			ffs := &fsx.Faulty{Fault: c}
			opts := fixtures.DamageWriterOptions()
			opts.FS = ffs
			_, err := fixtures.Generate(context.Background(), filepath.Join(parent, "out"), fixtures.DamageSpec(), opts)
			checkFault(t, err, ffs, parent)
		})
	}
}

// Over a forced --force replacement the old target must survive a failed
// publication untouched.
func TestFaultsWriterForceKeepsOld(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	if _, err := fixtures.Generate(context.Background(), target, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(target, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	ffs := &fsx.Faulty{Fault: fsx.Fault{Op: fsx.OpRename, Path: "/out", Err: syscall.ENOSPC}}
	opts := fixtures.DamageWriterOptions()
	opts.FS, opts.Force = ffs, true
	spec := fixtures.DamageSpec()
	spec.Seed++
	_, err = fixtures.Generate(context.Background(), target, spec, opts)
	checkFault(t, err, ffs, parent, "out")
	after, err := os.ReadFile(filepath.Join(target, "MANIFEST.json"))
	if err != nil || string(after) != string(before) {
		t.Fatalf("the old target changed under a failed --force publication: %v", err)
	}
}

func TestFaultsSpill(t *testing.T) {
	for _, c := range []fsx.Fault{
		{Op: fsx.OpWrite, Path: extsort.SpillPrefix, Err: syscall.ENOSPC, After: 1},
		{Op: fsx.OpCreate, Path: extsort.SpillPrefix, Err: syscall.ENOSPC, After: 1},
		{Op: fsx.OpMkdir, Path: extsort.SpillPrefix, Err: syscall.ENOSPC},
		{Op: fsx.OpRead, Path: extsort.SpillPrefix, Err: syscall.EIO, After: 3},
	} {
		t.Run(fmt.Sprintf("%s %v", c.Op, c.Err), func(t *testing.T) {
			tmp := t.TempDir()
			ffs := &fsx.Faulty{Fault: c}
			s := extsort.New(extsort.Options{Memory: 64 << 10, TmpDir: tmp, FS: ffs, MaxFanIn: 4})
			err := func() error {
				for i := range 20000 {
					if err := s.Add([]byte(fmt.Sprintf("key-%08d", (i*7919)%20000)), []byte("value")); err != nil {
						return err
					}
				}
				it, err := s.Finish(context.Background())
				if err != nil {
					return err
				}
				defer it.Close()
				for it.Next() {
				}
				return it.Err()
			}()
			if cerr := s.Close(); cerr != nil {
				t.Errorf("close: %v", cerr)
			}
			checkFault(t, err, ffs, tmp)
		})
	}
}

func TestFaultsLoader(t *testing.T) {
	// One file holding all buckets: every worker clips it, through a
	// copy-free rewrite; a second snapshot of small files is linked or,
	// when linking fails, copied.
	src := filepath.Join(t.TempDir(), "src")
	if _, err := fixtures.Generate(context.Background(), src, fixtures.DamageSpec(), writer.Options{}); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(t.TempDir(), "small")
	if _, err := fixtures.Generate(context.Background(), small, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		src   string
		fault fsx.Fault
		// link fails too, so whole files are copied.
		noLink bool
	}{
		{"clip write", src, fsx.Fault{Op: fsx.OpWrite, Path: "/ingest/", Err: syscall.ENOSPC}, false},
		{"clip fsync", src, fsx.Fault{Op: fsx.OpSync, Path: "/ingest/", Err: syscall.ENOSPC}, false},
		{"source read", src, fsx.Fault{Op: fsx.OpRead, Path: "/data/", Err: syscall.EIO}, false},
		{"copy write", small, fsx.Fault{Op: fsx.OpWrite, Path: "/ingest/", Err: syscall.ENOSPC}, true},
		{"copy read", small, fsx.Fault{Op: fsx.OpRead, Path: "/data/", Err: syscall.EIO, After: 2}, true},
		{"state write", small, fsx.Fault{Op: fsx.OpWrite, Path: "/state/", Err: syscall.ENOSPC}, false},
		{"publish rename", small, fsx.Fault{Op: fsx.OpRename, Path: "/into", Err: syscall.ENOSPC}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			ffs := &fsx.Faulty{Fault: c.fault}
			var fsys fsx.FS = ffs
			if c.noLink {
				fsys = &noLinkFS{ffs}
			}
			s, err := reader.Open(c.src, reader.Options{FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.NewLoader(3, reader.PolicyReject)
			if err != nil {
				t.Fatal(err)
			}
			// As the load command does: build in a stage, publish.
			err = func() error {
				stage, err := writer.BeginFS(filepath.Join(parent, "into"), false, fsys)
				if err != nil {
					return err
				}
				defer stage.Abort()
				for i := range 3 {
					if _, err := l.BuildStore(context.Background(), i, filepath.Join(stage.Dir(), fmt.Sprintf("worker-%04d", i))); err != nil {
						return fmt.Errorf("worker %d: %w", i, err)
					}
				}
				return stage.Publish()
			}()
			checkFault(t, err, ffs, parent)
		})
	}
}

// noLinkFS fails every hard link (as across filesystems), so the loader
// copies.
type noLinkFS struct{ *fsx.Faulty }

func (n *noLinkFS) Link(oldname, newname string) error {
	return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EXDEV}
}

// TestFaultsSourceRead: EIO while reading a source table, in the checksum
// pass and inside Pebble (checksums skipped), is an I/O failure (exit 4),
// never reported as damage (exit 2).
func TestFaultsSourceRead(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, err := fixtures.Generate(context.Background(), src, fixtures.DamageSpec(), fixtures.DamageWriterOptions()); err != nil {
		t.Fatal(err)
	}
	for _, skip := range []bool{false, true} {
		for _, after := range []int{0, 1, 2, 3} {
			t.Run(fmt.Sprintf("skip checksums %v after %d reads", skip, after), func(t *testing.T) {
				ffs := &fsx.Faulty{Fault: fsx.Fault{Op: fsx.OpRead, Path: "/data/", Err: syscall.EIO, After: after}}
				s, err := reader.Open(src, reader.Options{FS: ffs, SkipChecksums: skip})
				if err != nil {
					t.Fatal(err)
				}
				err = func() error {
					it := s.NewIterAll(context.Background())
					defer it.Close()
					for it.Next() {
					}
					return it.Err()
				}()
				checkFault(t, err, ffs, t.TempDir())
			})
		}
	}
}
