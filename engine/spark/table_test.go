package spark

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// The table behaves as a map under puts and deletes, collisions included
// (forced by putting colliding keys straight into the overflow path).
func TestTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tb := newTable()
	ref := map[string]string{}
	for i := 0; i < 200000; i++ {
		k := fmt.Sprintf("key-%d", r.IntN(5000))
		if r.IntN(4) == 0 {
			tb.del([]byte(k))
			delete(ref, k)
			continue
		}
		v := fmt.Sprintf("v%d-%s", i, string(make([]byte, r.IntN(40))))
		tb.put([]byte(k), []byte(v))
		ref[k] = v
	}
	check := func() {
		t.Helper()
		if tb.len() != len(ref) {
			t.Fatalf("len %d, want %d", tb.len(), len(ref))
		}
		tb.each(func(k, v []byte) error {
			if ref[string(k)] != string(v) {
				t.Fatalf("key %s: %q, want %q", k, v, ref[string(k)])
			}
			return nil
		})
	}
	check()
	// A key whose hash slot is taken by another key: simulate by moving a
	// live key's slot to a different key's record.
	var h uint64
	var victim string
	for hh, refv := range tb.idx {
		k, _ := tb.at(refv)
		h, victim = hh, string(k)
		break
	}
	_ = h
	// Put a colliding key through the overflow path directly.
	tb.over = map[string]uint64{"other": tb.add([]byte("other"), []byte("x"), false)}
	ref["other"] = "x"
	check()
	tb.put([]byte("other"), []byte("y"))
	ref["other"] = "y"
	check()
	tb.del([]byte("other"))
	delete(ref, "other")
	tb.del([]byte(victim))
	delete(ref, victim)
	check()
	// A record larger than a chunk.
	big := make([]byte, chunkSize+10)
	tb.put([]byte("big"), big)
	ref["big"] = string(big)
	check()
}

// A true collision: the slot of hash("k2") holds the record of "k1".
func TestTableCollision(t *testing.T) {
	tb := newTable()
	tb.idx[xxh3.Hash([]byte("k2"))] = tb.add([]byte("k1"), []byte("v1"), false)
	tb.put([]byte("k2"), []byte("v2")) // collides: goes to overflow
	tb.put([]byte("k2"), []byte("v3")) // updates the overflow entry
	got := map[string]string{}
	tb.each(func(k, v []byte) error { got[string(k)] = string(v); return nil })
	if len(got) != 2 || got["k1"] != "v1" || got["k2"] != "v3" {
		t.Fatalf("%v", got)
	}
	tb.del([]byte("k2"))
	tb.del([]byte("k2"))
	if tb.len() != 1 {
		t.Fatalf("len %d", tb.len())
	}
	// The slot's own key is deleted by its hash slot, not the overflow.
	tb.put([]byte("k2"), []byte("v4"))
	if len(tb.over) != 1 {
		t.Fatal("k2 should collide again")
	}
}
