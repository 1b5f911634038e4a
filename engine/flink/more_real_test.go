package flink

import (
	"bytes"
	"context"
	"errors"
	"github.com/rebucket/rebucket/engine/flink/keytype"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// TestStateProcessorAPISavepoint: a savepoint written by Flink's State
// Processor API (checkpoint id 0, null CheckpointProperties, only stateful
// operators, src at parallelism 2) reads, verifies and rewrites, and holds
// the same keyed entries as the live savepoint it was made from.
func TestStateProcessorAPISavepoint(t *testing.T) {
	ctx := context.Background()
	src := "testdata/probe-spa-8"
	rep, err := Verify(ctx, src, ScanOptions{})
	if err != nil || rep.FindingsTotal != 0 || rep.Entries != 1000 || rep.CheckpointID != 0 {
		t.Fatalf("%v %+v", err, rep)
	}
	out := filepath.Join(t.TempDir(), "o")
	if _, err := Rewrite(ctx, src, out, RewriteOptions{MaxParallelism: 128}); err != nil {
		t.Fatal(err)
	}
	eq, err := Equal(ctx, "testdata/probe-heap-files", out, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range eq.Differences {
		// SPA re-splits the source's operator state over 2 subtasks.
		if !strings.Contains(d, "operator state of operator f362c87ffabe89c8a91fa7d0a523ba6c") {
			t.Fatalf("unexpected difference: %s", d)
		}
	}
	if eq.EntriesA != eq.EntriesB {
		t.Fatalf("%+v", eq)
	}
}

func TestKeyTypesSavepoint(t *testing.T) {
	ctx := context.Background()
	src := "testdata/probe-types-heap"
	rep, err := Verify(ctx, src, ScanOptions{})
	if err != nil || rep.FindingsTotal != 0 {
		t.Fatalf("%v %+v", err, rep.Findings)
	}
	types := map[string]string{}
	for _, op := range rep.Operators {
		if op.KeySerializer != "" {
			types[op.UID] = op.KeyType
		}
	}
	if len(types) != 5 {
		t.Fatalf("key types %v", types)
	}
	for _, m := range []int{128, 256, 5} {
		out := filepath.Join(t.TempDir(), "o")
		res, err := Rewrite(ctx, src, out, RewriteOptions{MaxParallelism: m})
		if err != nil || res.Entries != 2000 {
			t.Fatalf("%d: %v %+v", m, err, res)
		}
		if eq, err := Equal(ctx, src, out, ScanOptions{}); err != nil || !eq.Equal {
			t.Fatalf("%v %+v", err, eq)
		}
	}
}

func TestRealPojoKeyRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	_, err := Rewrite(context.Background(), "testdata/probe-pojo-heap", out, RewriteOptions{MaxParallelism: 128})
	if !errors.Is(err, snapshotfmt.ErrUnsupported) {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{"pojo-counter", `"count"`, "PojoSerializer"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message lacks %q: %v", want, err)
		}
	}
	rep, err := Verify(context.Background(), "testdata/probe-pojo-heap", ScanOptions{})
	if err != nil || rep.FindingsTotal == 0 || !strings.Contains(rep.Findings[0].Problem, "cannot be rehashed") {
		t.Fatalf("%v %+v", err, rep)
	}
}

func TestLocate(t *testing.T) {
	sp, err := Open("testdata/probe-heap-files")
	if err != nil {
		t.Fatal(err)
	}
	c, err := keytype.ForName("string")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := c.Encode("k42")
	locs, err := sp.Locate(context.Background(), c, key)
	if err != nil || len(locs) != 1 {
		t.Fatalf("%v %+v", err, locs)
	}
	// research §6: "k42" -> key group 7 of 8, subtask 1.
	l := locs[0]
	if l.KeyGroup != 7 || l.Subtask != 1 || len(l.Entries) != 2 {
		t.Fatalf("%+v", l)
	}
	for _, e := range l.Entries {
		switch e.State {
		case "count":
			if !bytes.Equal(e.Value, []byte{0, 0, 0, 0, 0, 0, 0, 1}) {
				t.Fatalf("count %x", e.Value)
			}
		case "_timer_state/event_user-timers":
			if e.Timestamp != -1042 {
				t.Fatalf("timer %d", e.Timestamp)
			}
		default:
			t.Fatalf("state %s", e.State)
		}
	}
	lc, _ := keytype.ForName("long")
	key, _ = lc.Encode("-100")
	locs, err = sp.Locate(context.Background(), lc, key)
	if err != nil || len(locs) != 1 || len(locs[0].Entries) != 3 {
		t.Fatalf("%v %+v", err, locs)
	}
}

// TestRewriteBelowParallelism: Flink refuses to load an operator whose
// parallelism is above its max parallelism, so a max parallelism below
// the parallelism drops the subtasks above it (keyed state is regrouped,
// empty subtasks go), or refuses when they hold operator state.
func TestRewriteBelowParallelism(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "o")
	if _, err := Rewrite(ctx, "testdata/probe-heap-files", out, RewriteOptions{MaxParallelism: 1}); err != nil {
		t.Fatal(err)
	}
	sp, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range sp.Meta.Operators {
		if op.Parallelism > op.MaxParallelism {
			t.Fatalf("%s: parallelism %d above max parallelism %d", op.Label(), op.Parallelism, op.MaxParallelism)
		}
		for _, st := range op.Subtasks {
			if st.Index >= op.Parallelism {
				t.Fatalf("%s: subtask %d at parallelism %d", op.Label(), st.Index, op.Parallelism)
			}
		}
	}
	if eq, err := Equal(ctx, "testdata/probe-heap-files", out, ScanOptions{}); err != nil || !eq.Equal {
		t.Fatalf("%v %+v", err, eq)
	}
	// spa-8 runs src at parallelism 2; its subtask 1 holds an empty
	// offset list, which may go.
	if _, err := Rewrite(ctx, "testdata/probe-spa-8", filepath.Join(t.TempDir(), "o"), RewriteOptions{MaxParallelism: 1}); err != nil {
		t.Fatal(err)
	}
	// Operator state on a subtask that would have to go is refused.
	dir := copySavepoint(t, "probe-spa-8")
	sp, _ = Open(dir)
	src := findOp(sp.Meta, "src")
	src.Subtasks[1].ManagedOperator = src.Subtasks[0].ManagedOperator
	writeMeta(t, dir, sp.Meta)
	out = filepath.Join(t.TempDir(), "o")
	_, err = Rewrite(ctx, dir, out, RewriteOptions{MaxParallelism: 1})
	if !errors.Is(err, snapshotfmt.ErrRefused) || !strings.Contains(err.Error(), `"src"`) {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("target written")
	}
}
