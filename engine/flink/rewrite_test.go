package flink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rebucket/rebucket/engine/flink/keytype"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func TestRewriteRealSavepoints(t *testing.T) {
	ctx := context.Background()
	for _, name := range realCanonical {
		for _, m := range []int{128, 256, 5, 8, 32768} {
			src := "testdata/probe-" + name
			dst := filepath.Join(t.TempDir(), "out")
			res, err := Rewrite(ctx, src, dst, RewriteOptions{MaxParallelism: m, Parallelism: 2})
			if err != nil {
				t.Fatalf("%s -> %d: %v", name, m, err)
			}
			if !res.Verified || res.Entries != 1000 || res.FromMaxParallelism != 8 {
				t.Fatalf("%s -> %d: %+v", name, m, res)
			}
			sp, err := Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range sp.Meta.Operators {
				if int(op.MaxParallelism) != m {
					t.Fatalf("%s -> %d: operator %s keeps max parallelism %d", name, m, op.Label(), op.MaxParallelism)
				}
			}
			rep, err := Verify(ctx, dst, ScanOptions{})
			if err != nil || rep.FindingsTotal != 0 || rep.Entries != 1000 {
				t.Fatalf("%s -> %d: verify %v %+v", name, m, err, rep.Findings)
			}
			eq, err := Equal(ctx, src, dst, ScanOptions{})
			if err != nil || !eq.Equal {
				t.Fatalf("%s -> %d: equal %v %+v", name, m, err, eq)
			}
			// Compression and the trailing checkpoint properties are kept.
			for _, op := range rep.Operators {
				if op.KeySerializer != "" && op.Compressed != strings.HasSuffix(name, "snappy") {
					t.Fatalf("%s -> %d: compression lost", name, m)
				}
			}
			if string(sp.Meta.Trailing) == "" {
				t.Fatalf("trailing properties lost")
			}
			// Entries of the output sit under their hashed key group with a
			// prefix of the new width (checked by Verify above); check the
			// width directly on one entry too.
			for _, op := range sp.Meta.Operators {
				for _, st := range op.Subtasks {
					if st.ManagedKeyed == nil {
						continue
					}
					ks, err := sp.OpenKeyed(op, st.Index, st.ManagedKeyed)
					if err != nil {
						t.Fatal(err)
					}
					if st.ManagedKeyed.Delegate.Type != handleRelativeFile {
						t.Fatalf("output handle is %s", st.ManagedKeyed.Delegate.Kind())
					}
					ks.ForEach(func(kg int, e Entry) error {
						w := keytype.PrefixBytes(m)
						p := int(e.Key[0])
						if w == 2 {
							p = p<<8 | int(e.Key[1])
						}
						if p != kg {
							t.Fatalf("prefix %x in key group %d", e.Key[:w], kg)
						}
						return nil
					})
					ks.Close()
				}
			}
		}
	}
}

func TestRewriteSpills(t *testing.T) {
	ctx := context.Background()
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Rewrite(ctx, "testdata/probe-heap-files-snappy", dst, RewriteOptions{MaxParallelism: 128, Memory: 4 << 10, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.SpilledRuns == 0 {
		t.Fatalf("no spill with a 4 KiB budget: %+v", res)
	}
	eq, err := Equal(ctx, "testdata/probe-heap-files-snappy", dst, ScanOptions{})
	if err != nil || !eq.Equal {
		t.Fatalf("%v %+v", err, eq)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".rebucket-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestRewriteRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cases := []struct {
		src  string
		m    int
		want error
	}{
		{"testdata/probe-heap-native", 128, snapshotfmt.ErrUnsupported},
		{"testdata/probe-rocksdb-native", 128, snapshotfmt.ErrUnsupported},
		{"testdata/probe-heap-files", 0, snapshotfmt.ErrInvalidArgument},
		{"testdata/probe-heap-files", 40000, snapshotfmt.ErrInvalidArgument},
		{"testdata/nonexistent", 128, snapshotfmt.ErrNotFound},
	}
	for _, c := range cases {
		dst := filepath.Join(dir, "out")
		_, err := Rewrite(ctx, c.src, dst, RewriteOptions{MaxParallelism: c.m})
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.src, err, c.want)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Fatalf("%s: target written", c.src)
		}
	}
	// An existing target is refused.
	os.Mkdir(filepath.Join(dir, "exists"), 0o755)
	if _, err := Rewrite(ctx, "testdata/probe-heap-files", filepath.Join(dir, "exists"), RewriteOptions{MaxParallelism: 16}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("existing target: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".rebucket-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// countingProgress is safe for the concurrent Add calls Progress allows.
type countingProgress struct {
	total   int64
	done    atomic.Int64
	started int
}

func (p *countingProgress) Start(total int64, _ string) { p.total = total; p.started++ }
func (p *countingProgress) Add(n int64)                 { p.done.Add(n) }
func (p *countingProgress) Finish()                     {}

func TestRewriteProgressAndCancel(t *testing.T) {
	src := "testdata/probe-heap-files"
	p := &countingProgress{}
	if _, err := Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "o"), RewriteOptions{MaxParallelism: 128, Progress: p}); err != nil {
		t.Fatal(err)
	}
	// Progress counts the bytes of the key-group sections, out of the
	// streams' total (headers included).
	if d := p.done.Load(); p.started != 1 || p.total <= 0 || d <= 0 || d > p.total {
		t.Fatalf("progress %+v", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	_, err := Rewrite(ctx, src, filepath.Join(dir, "o"), RewriteOptions{MaxParallelism: 128})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind after cancel: %v", ents)
	}
}

// TestRewriteTinyMemory: a budget far below the state spills many runs,
// which are merged in passes of at most maxRuns; the result is still
// equal to the source.
func TestRewriteTinyMemory(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src")
	if err := Generate(src, GenerateOptions{Keys: 100000, Compressed: true}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o")
	res, err := Rewrite(ctx, src, out, RewriteOptions{MaxParallelism: 256, Memory: 64 << 10, Files: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.SpilledRuns <= maxRuns {
		t.Fatalf("expected more than %d spilled runs: %+v", maxRuns, res)
	}
	if eq, err := Equal(ctx, src, out, ScanOptions{}); err != nil || !eq.Equal {
		t.Fatalf("%v %+v", err, eq)
	}
}
