package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rebucket/rebucket/dataset"
	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

// runPrompt is runRoot failing the test when the command does not return
// within a few seconds (open(2) of a FIFO blocks until a writer comes,
// past SIGTERM and SIGINT).
func runPrompt(t *testing.T, args ...string) (string, int) {
	t.Helper()
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, code := runRoot(t, args...)
		done <- result{out, code}
	}()
	select {
	case r := <-done:
		return r.out, r.code
	case <-time.After(20 * time.Second):
		t.Fatalf("%v did not return (blocked in open?)", args)
		return "", 0
	}
}

// replaceWith replaces the file at p by a FIFO, or by a symbolic link to
// /dev/null.
func replaceWith(t *testing.T, p, kind string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(p, 0o644)
	case "mknod":
		// The device of /dev/null itself (needs CAP_MKNOD).
		err = syscall.Mknod(p, syscall.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
		if err != nil {
			t.Skipf("mknod: %v", err)
		}
	default:
		err = os.Symlink("/dev/null", p)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A FIFO, a link to a device, or a device node, in every input position: every reading
// command returns at once with exit 2 (verify, whose damage is a finding,
// with 1 or 2), naming the file. Before, each blocked in open(2) forever.
func TestSpecialFileInputs(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "snap")
	if _, err := fixtures.Generate(context.Background(), src, fixtures.Spec{Buckets: 8, Width: 2, Keys: 50}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest()
	positions := map[string]string{
		"manifest":    "MANIFEST.json",
		"data file":   m.Files[0].Path,
		"worker file": m.WorkerStates[0].Files[0].Path,
		"data dir":    "data",
		"workers dir": "workers",
	}
	commands := map[string]func(snap, out string) []string{
		"inspect": func(snap, out string) []string { return []string{"inspect", snap} },
		"verify":  func(snap, out string) []string { return []string{"verify", snap, "--deep"} },
		"rewrite": func(snap, out string) []string { return []string{"rewrite", snap, "--buckets", "4", "--out", out} },
		"split": func(snap, out string) []string {
			return []string{"split", snap, "--out", out + "a", "--out", out + "b", "--by", "state=count/per_user"}
		},
		"export": func(snap, out string) []string { return []string{"export", snap, "--format", "parquet", "--out", out} },
		"load":   func(snap, out string) []string { return []string{"load", snap, "--width", "2", "--into", out} },
		"locate": func(snap, out string) []string { return []string{"locate", snap, "user-1"} },
	}
	for pos, rel := range positions {
		for _, kind := range []string{"fifo", "device", "mknod"} {
			for name, args := range commands {
				if pos != "manifest" && (name == "inspect" || name == "locate") {
					continue // they read only the manifest (and locate one file)
				}
				t.Run(pos+"/"+kind+"/"+name, func(t *testing.T) {
					dir := t.TempDir()
					snap := filepath.Join(dir, "snap")
					if err := os.CopyFS(snap, os.DirFS(src)); err != nil {
						t.Fatal(err)
					}
					replaceWith(t, filepath.Join(snap, filepath.FromSlash(rel)), kind)
					out, code := runPrompt(t, args(snap, filepath.Join(dir, "out"))...)
					ok := code == exitUsage || (name == "verify" && code == exitFindings)
					if !ok {
						t.Fatalf("exit %d, want 2: %s", code, out)
					}
					if !strings.Contains(out, filepath.Base(rel)) {
						t.Errorf("output does not name %s: %s", rel, out)
					}
				})
			}
		}
	}
}

// The inputs of import: the dataset, --states, --worker-state and the
// per-worker state file its metadata names.
func TestImportSpecialFileInputsCLI(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "snap")
	if _, err := fixtures.Generate(context.Background(), src, fixtures.Spec{Buckets: 8, Width: 2, Keys: 50}, writer.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(base, "ds.parquet")
	if _, err := dataset.Export(context.Background(), s, ds, dataset.ExportOptions{Format: dataset.Parquet}); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(base, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"dataset fifo", []string{"import", fifo, "--buckets", "4", "--out", out()}, "FIFO"},
		{"dataset device", []string{"import", "/dev/null", "--buckets", "4", "--out", out()}, "character device"},
		{"states fifo", []string{"import", ds, "--buckets", "4", "--out", out(), "--states", fifo}, "FIFO"},
		{"states device", []string{"import", ds, "--buckets", "4", "--out", out(), "--states", "/dev/zero"}, "character device"},
		{"worker-state fifo", []string{"import", ds, "--buckets", "4", "--out", out(), "--worker-state", fifo}, "FIFO"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, code := runPrompt(t, c.args...)
			if code != exitUsage || !strings.Contains(o, c.want) {
				t.Fatalf("exit %d, want 2 saying %q: %s", code, c.want, o)
			}
		})
	}
	t.Run("metadata-named worker file fifo", func(t *testing.T) {
		w := filepath.Join(base, "ds.workers.parquet")
		replaceWith(t, w, "fifo")
		o, code := runPrompt(t, "import", ds, "--buckets", "4", "--out", out())
		if code != exitUsage || !strings.Contains(o, "FIFO") || !strings.Contains(o, "ds.workers.parquet") {
			t.Fatalf("exit %d, want 2 naming the FIFO: %s", code, o)
		}
	})
}
