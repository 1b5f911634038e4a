package rewrite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/writer"
)

func TestParseSplitRule(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"state=count/per_user", "state=count/per_user", true},
		{"state=a/b,c/d", "state=a/b,c/d", true},
		{"key-prefix=75736572", "key-prefix=75736572", true},
		{"buckets=0-3", "buckets=0-3", true},
		{"buckets=3-1", "", false},
		{"buckets=x", "", false},
		{"key-prefix=zz", "", false},
		{"state=nostep", "", false},
		{"color=red", "", false},
		{"state=", "", false},
	}
	for _, c := range cases {
		r, err := ParseSplitRule(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v", c.in, err)
			continue
		}
		if err != nil && !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
			t.Errorf("%q: err %v is not ErrInvalidArgument", c.in, err)
		}
		if c.ok && r.String() != c.want {
			t.Errorf("%q: %s", c.in, r)
		}
	}
}

func TestSplit(t *testing.T) {
	tmp := t.TempDir()
	src := generate(t, tmp, fixtures.Spec{Buckets: 8, Keys: 500}, writer.Options{FileSize: 32 << 10})
	before := treeHash(t, src)
	sc := readAll(t, src, nil)
	cases := []struct {
		rule string
		inA  func(entry string) bool
	}{
		{"state=count/per_user,window/events", func(e string) bool {
			return strings.HasPrefix(e, "count/per_user\x00") || strings.HasPrefix(e, "window/events\x00")
		}},
		{"key-prefix=" + fmt.Sprintf("%x", "user-0000001"), func(e string) bool {
			_, rest, _ := strings.Cut(e, "\x00")
			return strings.HasPrefix(rest, "user-0000001")
		}},
		{"buckets=2-5", func(e string) bool {
			_, rest, _ := strings.Cut(e, "\x00")
			key, _, _ := strings.Cut(rest, "\x00")
			b := sc.m.Partitioning.Bucket([]byte(key))
			return b >= 2 && b <= 5
		}},
	}
	for i, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			rule, err := ParseSplitRule(c.rule)
			if err != nil {
				t.Fatal(err)
			}
			a, b := filepath.Join(tmp, fmt.Sprint("a", i)), filepath.Join(tmp, fmt.Sprint("b", i))
			sum, err := Split(context.Background(), SplitOptions{Source: src, OutA: a, OutB: b, Rule: rule, Parallelism: 2, Tool: "test"})
			if err != nil {
				t.Fatal(err)
			}
			ac, bc := readAll(t, a, nil), readAll(t, b, nil)
			if ac.total == 0 || bc.total == 0 {
				t.Fatalf("a degenerate split: %d and %d entries", ac.total, bc.total)
			}
			if sum.EntriesA != uint64(ac.total) || sum.EntriesB != uint64(bc.total) {
				t.Fatalf("summary %+v", sum)
			}
			union := contents{entries: map[string]int{}, workers: ac.workers}
			for e, n := range ac.entries {
				if !c.inA(e) {
					t.Fatalf("A holds %q", e)
				}
				union.entries[e] += n
			}
			for e, n := range bc.entries {
				if c.inA(e) {
					t.Fatalf("B holds %q", e)
				}
				union.entries[e] += n
			}
			sameContents(t, sc, union, nil)
			bc.entries = sc.entries
			sameContents(t, sc, bc, nil) // per-worker state in B too
			for _, o := range []contents{ac, bc} {
				if o.m.Partitioning != sc.m.Partitioning || o.m.WidthAtWrite != sc.m.WidthAtWrite || len(o.m.States) != len(sc.m.States) {
					t.Fatalf("output header differs: %+v", o.m.Partitioning)
				}
				if l := o.m.Lineage[len(o.m.Lineage)-1]; l.Action != "split" || !strings.Contains(l.Note, rule.String()) {
					t.Fatalf("lineage %+v", l)
				}
			}
		})
	}
	if treeHash(t, src) != before {
		t.Fatal("source changed")
	}
	// Refusals.
	r, _ := ParseSplitRule("buckets=0-99")
	if _, err := Split(context.Background(), SplitOptions{Source: src, OutA: filepath.Join(tmp, "x"), OutB: filepath.Join(tmp, "y"), Rule: r}); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Fatalf("bucket range beyond N: %v", err)
	}
	r, _ = ParseSplitRule("state=no/such")
	if _, err := Split(context.Background(), SplitOptions{Source: src, OutA: filepath.Join(tmp, "x"), OutB: filepath.Join(tmp, "y"), Rule: r}); !errors.Is(err, snapshotfmt.ErrInvalidArgument) {
		t.Fatalf("unknown state: %v", err)
	}
	r, _ = ParseSplitRule("buckets=0-1")
	if _, err := Split(context.Background(), SplitOptions{Source: src, OutA: filepath.Join(tmp, "x"), OutB: filepath.Join(tmp, "x"), Rule: r}); !errors.Is(err, snapshotfmt.ErrRefused) {
		t.Fatalf("same outputs: %v", err)
	}
	for _, p := range []string{"x", "y"} {
		if _, err := os.Stat(filepath.Join(tmp, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("refused split left %s", p)
		}
	}
	noLeftovers(t, tmp)
}
