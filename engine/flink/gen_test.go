package flink

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
)

// TestGenerateMatchesFlink: the generator at 200 keys writes the same
// state as the real Flink 2.3.0 probe savepoint (keyed entries, operator
// state, everything Equal compares).
func TestGenerateMatchesFlink(t *testing.T) {
	sp, err := Open("testdata/probe-heap-files")
	if err != nil {
		t.Fatal(err)
	}
	src := findOp(sp.Meta, "src").Subtasks[0].ManagedOperator.Delegate.Data
	if binary.BigEndian.Uint64(src[len(src)-8:]) != 200 {
		t.Fatalf("template offset is not the last 8 bytes: %x", src)
	}
	ctx := context.Background()
	for _, comp := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "gen")
		if err := Generate(dir, GenerateOptions{Keys: 200, Compressed: comp}); err != nil {
			t.Fatal(err)
		}
		eq, err := Equal(ctx, "testdata/probe-heap-files", dir, ScanOptions{})
		if err != nil || !eq.Equal {
			t.Fatalf("compressed=%v: %v %+v", comp, err, eq)
		}
		rep, err := Verify(ctx, dir, ScanOptions{})
		if err != nil || rep.FindingsTotal != 0 {
			t.Fatalf("%v %+v", err, rep.Findings)
		}
	}
	dir := filepath.Join(t.TempDir(), "gen256")
	if err := Generate(dir, GenerateOptions{Keys: 5000, MaxParallelism: 256, Parallelism: 3}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, dir, ScanOptions{})
	if err != nil || rep.FindingsTotal != 0 || rep.Entries != 25000 {
		t.Fatalf("%v %d %+v", err, rep.Entries, rep.Findings)
	}
}

func TestForEachEntryDecodesProbeKeys(t *testing.T) {
	sp, err := Open("testdata/probe-rocksdb-files")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	err = sp.ForEachEntry(context.Background(), func(e *KeyedEntry) error {
		v, err := e.KeyCodec.Decode(e.Key)
		if err != nil {
			return err
		}
		switch e.State.Name {
		case "count":
			if _, ok := v.(string); !ok || string(e.Rest) != "\x00" {
				t.Fatalf("count key %v rest %x", v, e.Rest)
			}
		case "tags":
			if _, ok := v.(int64); !ok || len(e.Rest) != 4 {
				t.Fatalf("tags key %v rest %x", v, e.Rest)
			}
		case "_timer_state/event_user-timers":
			switch k := v.(type) {
			case string:
				var i int64
				fmt.Sscanf(k, "k%d", &i)
				if e.Timestamp != -1000-i {
					t.Fatalf("timer of %s at %d", k, e.Timestamp)
				}
			case int64:
				if e.Timestamp != 1000000+k {
					t.Fatalf("timer of %d at %d", k, e.Timestamp)
				}
			}
		}
		seen[e.State.Name]++
		return nil
	})
	if err != nil || seen["count"] != 200 || seen["_timer_state/event_user-timers"] != 400 {
		t.Fatalf("%v %v", err, seen)
	}
}

func TestRewriteEdgeCases(t *testing.T) {
	ctx := context.Background()
	// No keys: header-only keyed streams.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := Generate(empty, GenerateOptions{Keys: 0}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{1, 16, 300} {
		out := filepath.Join(t.TempDir(), "o")
		res, err := Rewrite(ctx, empty, out, RewriteOptions{MaxParallelism: m})
		if err != nil || res.Entries != 0 {
			t.Fatalf("empty -> %d: %v %+v", m, err, res)
		}
		if eq, err := Equal(ctx, empty, out, ScanOptions{}); err != nil || !eq.Equal {
			t.Fatalf("%v %+v", err, eq)
		}
	}
	// Max parallelism 1 (one key group, one file) and back up to 4096.
	one := filepath.Join(t.TempDir(), "one")
	if _, err := Rewrite(ctx, "testdata/probe-rocksdb-files", one, RewriteOptions{MaxParallelism: 1}); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "back")
	if _, err := Rewrite(ctx, one, back, RewriteOptions{MaxParallelism: 4096, Files: 7}); err != nil {
		t.Fatal(err)
	}
	if eq, err := Equal(ctx, "testdata/probe-rocksdb-files", back, ScanOptions{}); err != nil || !eq.Equal {
		t.Fatalf("%v %+v", err, eq)
	}
	sp, _ := Open(back)
	if err := sp.CheckWidth(4096); err != nil {
		t.Fatal(err)
	}
	if err := sp.CheckWidth(4097); err == nil {
		t.Fatal("width above max parallelism accepted")
	}
}
