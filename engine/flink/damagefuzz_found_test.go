package flink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Bugs found by internal/crashtest's TestDamagedSavepointFuzz (byte flips
// in real savepoints' _metadata).

// A subtask index outside the operator's parallelism (or given twice) was
// decoded without a word: verify reported 0 findings and rewrite dropped
// the subtask's state, exit 0. Flink refuses such a _metadata.
func TestDecodeRefusesBadSubtaskIndex(t *testing.T) {
	b, err := os.ReadFile("testdata/probe-heap-files/_metadata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(op *OperatorState)
		say  string
	}{
		{"index = parallelism", func(op *OperatorState) { op.Subtasks[0].Index = op.Parallelism }, "outside"},
		{"huge index", func(op *OperatorState) { op.Subtasks[0].Index = 15728640 }, "outside"},
		{"finished index past parallelism", func(op *OperatorState) {
			op.Subtasks[0].Index, op.Subtasks[0].Finished = op.Parallelism+3, true
		}, "outside"},
		{"index twice", func(op *OperatorState) { op.Subtasks[1].Index = op.Subtasks[0].Index }, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			md, err := DecodeMetadata(b)
			if err != nil {
				t.Fatal(err)
			}
			op := findOp(md, "long-agg")
			c.edit(op)
			enc, err := md.Encode()
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeMetadata(enc)
			if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "subtask index") || !strings.Contains(err.Error(), c.say) {
				t.Fatalf("decode: %v, want ErrCorrupt naming the subtask index (%s)", err, c.say)
			}
		})
	}
}

// Rewrite carried damaged operator state (a partition offset past its
// stream) to the self-verification, which failed the run after the long
// work: exit 4 (a failure while working) instead of 2 (damaged input).
func TestRewriteRefusesDamagedOperatorStateUpFront(t *testing.T) {
	src := copySavepoint(t, "probe-heap-files")
	b, err := os.ReadFile(filepath.Join(src, MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	md, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	h := findOp(md, "src").Subtasks[0].ManagedOperator
	h.States[0].Offsets[0] = 7133701809754865853
	writeMeta(t, src, md)
	dst := filepath.Join(t.TempDir(), "out")
	_, err = Rewrite(context.Background(), src, dst, RewriteOptions{MaxParallelism: 16, Parallelism: 1})
	if !errors.Is(err, snapshotfmt.ErrCorrupt) || !strings.Contains(err.Error(), "offset 7133701809754865853") {
		t.Fatalf("rewrite: %v, want ErrCorrupt naming the offset", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	if len(ents) != 0 {
		t.Fatalf("a refused rewrite left %v", ents)
	}
}
