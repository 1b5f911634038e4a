package snapshotfmt

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestWorkerItemsRoundTrip(t *testing.T) {
	for _, items := range [][][]byte{
		nil,
		{{}},
		{[]byte("events-0:17"), {}, []byte("x")},
		{bytes.Repeat([]byte{0xab}, 70000)},
	} {
		enc := EncodeWorkerItems(items)
		dec, err := DecodeWorkerItems(enc)
		if err != nil {
			t.Fatal(err)
		}
		if len(dec) != len(items) {
			t.Fatalf("%d items, want %d", len(dec), len(items))
		}
		for i := range dec {
			if !bytes.Equal(dec[i], items[i]) {
				t.Fatalf("item %d differs", i)
			}
			// Capacity is clipped so an append cannot clobber the next item.
			if cap(dec[i]) != len(dec[i]) {
				t.Fatalf("item %d capacity %d > length %d", i, cap(dec[i]), len(dec[i]))
			}
		}
	}
}

func TestDecodeWorkerItemsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"one trailing byte", []byte{0, 0, 0, 0, 1}},
		{"three trailing bytes", []byte{0, 0, 0}},
		{"length past end", []byte{0, 0, 0, 5, 'a', 'b'}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeWorkerItems(tc.in); !errors.Is(err, ErrCorrupt) {
				t.Errorf("DecodeWorkerItems(%x) = %v, want ErrCorrupt", tc.in, err)
			}
		})
	}
}

func TestRedistribute(t *testing.T) {
	it := func(s ...string) [][]byte {
		var out [][]byte
		for _, x := range s {
			out = append(out, []byte(x))
		}
		return out
	}
	old := [][][]byte{it("a", "b"), it("c"), it("d", "e")}
	for _, tc := range []struct {
		rule  Rule
		width int
		want  [][][]byte
	}{
		{RuleSplit, 2, [][][]byte{it("a", "c", "e"), it("b", "d")}},
		{RuleSplit, 3, old},
		{RuleUnion, 3, old},
		{RuleBroadcast, 3, old},
		{RuleSplit, 1, [][][]byte{it("a", "b", "c", "d", "e")}},
		{RuleUnion, 2, [][][]byte{it("a", "b", "c", "d", "e"), it("a", "b", "c", "d", "e")}},
		{RuleBroadcast, 4, [][][]byte{it("a", "b"), it("a", "b"), it("a", "b"), it("a", "b")}},
	} {
		got := Redistribute(tc.rule, old, tc.width)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s to %d: %q, want %q", tc.rule, tc.width, got, tc.want)
		}
	}
}
