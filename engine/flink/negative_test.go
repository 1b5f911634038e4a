package flink

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// copySavepoint copies a test savepoint into a temporary directory.
func copySavepoint(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS("testdata/"+name)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeMeta(t *testing.T, dir string, md *Metadata) {
	b, err := md.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetadataFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func findOp(md *Metadata, uid string) *OperatorState {
	for _, op := range md.Operators {
		if op.UID == uid {
			return op
		}
	}
	return nil
}

// TestVerifyFindsPatchedMaxParallelism is the negative control of the
// research: only max parallelism patched in _metadata. Flink's RocksDB
// restore silently loses most keys; Verify must say so.
func TestVerifyFindsPatchedMaxParallelism(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range sp.Meta.Operators {
		op.MaxParallelism = 128
	}
	writeMeta(t, dir, sp.Meta)
	rep, err := Verify(context.Background(), dir, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FindingsTotal == 0 || !strings.Contains(rep.Findings[0].Problem, "hashes to key group") {
		t.Fatalf("no finding for a patched max parallelism: %+v", rep.Findings)
	}
	// The unpatched one is clean.
	rep, err = Verify(context.Background(), "testdata/probe-heap-files", ScanOptions{})
	if err != nil || rep.FindingsTotal != 0 {
		t.Fatalf("%v %+v", err, rep.Findings)
	}
}

func TestVerifyFindsWrongPrefix(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, _ := Open(dir)
	h := findOp(sp.Meta, "str-counter").Subtasks[0].ManagedKeyed
	p := filepath.Join(dir, h.Delegate.Path)
	b, _ := os.ReadFile(p)
	off := h.Offsets[0] + 2 + 4 // state id, key length
	if b[off] != 0 {
		t.Fatalf("expected prefix 0, found %x", b[off])
	}
	b[off] = 1
	os.WriteFile(p, b, 0o644)
	rep, err := Verify(context.Background(), dir, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FindingsTotal == 0 || !strings.Contains(rep.Findings[0].Problem, "prefix 1 in the section of key group 0") {
		t.Fatalf("%+v", rep.Findings)
	}
	eq, err := Equal(context.Background(), "testdata/probe-heap-files", dir, ScanOptions{})
	if err != nil || !eq.Equal {
		// The entry's bytes after the prefix are unchanged: Equal compares
		// entries without prefixes, so only Verify sees this damage.
		t.Fatalf("%v %+v", err, eq)
	}
}

func TestEqualFindsChangedValue(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, _ := Open(dir)
	h := findOp(sp.Meta, "str-counter").Subtasks[1].ManagedKeyed
	p := filepath.Join(dir, h.Delegate.Path)
	b, _ := os.ReadFile(p)
	// count values are 8-byte longs equal to 1; make one 2.
	i := bytes.Index(b[h.Offsets[0]:], []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1})
	if i < 0 {
		t.Fatal("no count value found")
	}
	b[int(h.Offsets[0])+i+11] = 2
	os.WriteFile(p, b, 0o644)
	eq, err := Equal(context.Background(), "testdata/probe-heap-files", dir, ScanOptions{})
	if err != nil || eq.Equal || !strings.Contains(eq.Differences[0], `"count"`) {
		t.Fatalf("%v %+v", err, eq)
	}
	// Operator state changes are seen too.
	dir2 := copySavepoint(t, "probe-heap-files")
	sp2, _ := Open(dir2)
	src := findOp(sp2.Meta, "src").Subtasks[0].ManagedOperator.Delegate
	src.Data[len(src.Data)-1] ^= 1
	writeMeta(t, dir2, sp2.Meta)
	eq, err = Equal(context.Background(), "testdata/probe-heap-files", dir2, ScanOptions{})
	if err != nil || eq.Equal || !strings.Contains(eq.Differences[0], "operator state") {
		t.Fatalf("%v %+v", err, eq)
	}
}

func TestTruncatedStateFile(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, _ := Open(dir)
	h := findOp(sp.Meta, "long-agg").Subtasks[1].ManagedKeyed
	p := filepath.Join(dir, h.Delegate.Path)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-10], 0o644)
	_, err := Verify(context.Background(), dir, ScanOptions{})
	if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), h.Delegate.Path) {
		t.Fatalf("size mismatch: %v", err)
	}
	// Same truncation with _metadata agreeing on the size: the last key
	// group cannot be read.
	h.Delegate.Size -= 10
	writeMeta(t, dir, sp.Meta)
	_, err = Verify(context.Background(), dir, ScanOptions{})
	if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "key group 7") {
		t.Fatalf("truncated: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Rewrite(context.Background(), dir, out, RewriteOptions{MaxParallelism: 128}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("rewrite of a truncated savepoint: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("target written")
	}
}

// TestRewriteRefusesPojoKey: a key serializer that cannot be rehashed is
// refused before anything is written, naming operator, states and class.
func TestRewriteRefusesPojoKey(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, _ := Open(dir)
	const pojo = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
	for _, st := range findOp(sp.Meta, "str-counter").Subtasks {
		h := st.ManagedKeyed
		if h == nil {
			continue
		}
		p := filepath.Join(dir, h.Delegate.Path)
		b, _ := os.ReadFile(p)
		old := "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
		i := bytes.Index(b, []byte(old))
		if i != 11 {
			t.Fatalf("key serializer class at %d", i)
		}
		nb := append([]byte{}, b[:9]...)
		nb = append(nb, byte(len(pojo)>>8), byte(len(pojo)))
		nb = append(nb, pojo...)
		nb = append(nb, b[i+len(old):]...)
		delta := int64(len(pojo) - len(old))
		for j := range h.Offsets {
			if h.Offsets[j] != 0 {
				h.Offsets[j] += delta
			}
		}
		h.Delegate.Size += delta
		os.WriteFile(p, nb, 0o644)
	}
	writeMeta(t, dir, sp.Meta)
	rep, err := Inspect(context.Background(), dir, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op := rep.Operators[len(rep.Operators)-1]
	if op.KeySerializer != pojo || op.KeyType != "" {
		t.Fatalf("%+v", op)
	}
	out := filepath.Join(t.TempDir(), "out")
	_, err = Rewrite(context.Background(), dir, out, RewriteOptions{MaxParallelism: 128})
	if !errors.Is(err, snapshotfmt.ErrUnsupported) {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{"str-counter", `"count"`, pojo, "nothing was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("target written")
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".rebucket-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestSourceUntouched(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files-snappy")
	before := map[string]string{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		before[e.Name()] = string(b)
	}
	if _, err := Rewrite(context.Background(), dir, filepath.Join(t.TempDir(), "o"), RewriteOptions{MaxParallelism: 256}); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(dir)
	if len(ents) != len(before) {
		t.Fatalf("source directory changed")
	}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if before[e.Name()] != string(b) {
			t.Fatalf("%s changed", e.Name())
		}
	}
}

func TestVerifyFindsMissingOperatorStateFile(t *testing.T) {
	dir := copySavepoint(t, "probe-heap-files")
	sp, _ := Open(dir)
	h := findOp(sp.Meta, "src").Subtasks[0].ManagedOperator
	h.Delegate = &StreamHandle{Type: handleRelativeFile, Path: "gone", Size: 197}
	writeMeta(t, dir, sp.Meta)
	rep, err := Verify(context.Background(), dir, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FindingsTotal != 1 || !strings.Contains(rep.Findings[0].Problem, "operator state unreadable") {
		t.Fatalf("%+v", rep.Findings)
	}
	if _, err := Rewrite(context.Background(), dir, filepath.Join(t.TempDir(), "o"), RewriteOptions{MaxParallelism: 16}); !errors.Is(err, snapshotfmt.ErrCorrupt) {
		t.Fatalf("rewrite with a missing operator state file: %v", err)
	}
}
