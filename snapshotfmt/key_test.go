package snapshotfmt

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		b, s := r.Uint32(), uint16(r.Uint32())
		key := randBytes(r, r.IntN(40))
		var sub []byte
		if r.IntN(2) == 0 {
			sub = randBytes(r, r.IntN(20))
		}
		enc := EncodeKey(b, s, key, sub)
		if len(enc) != KeyHeaderLen+len(key)+len(sub) {
			t.Fatalf("EncodeKey length %d", len(enc))
		}
		if got := AppendKey([]byte("prefix"), b, s, key, sub); !bytes.Equal(got[6:], enc) {
			t.Fatalf("AppendKey differs from EncodeKey")
		}
		dk, err := DecodeKey(enc)
		if err != nil {
			t.Fatal(err)
		}
		if dk.Bucket != b || dk.State != s || !bytes.Equal(dk.Key, key) || !bytes.Equal(dk.SubKey, sub) {
			t.Fatalf("round trip of (%d,%d,%x,%x) gave %+v", b, s, key, sub, dk)
		}
		if kb, ok := KeyBucket(enc); !ok || kb != b {
			t.Fatalf("KeyBucket = %d, %v", kb, ok)
		}
		// Key has its capacity clipped, so appending to it cannot
		// overwrite the sub-key.
		if cap(dk.Key) != len(dk.Key) {
			t.Fatalf("decoded key capacity %d > length %d", cap(dk.Key), len(dk.Key))
		}
		WithBucket(enc, b^1)
		if kb, _ := KeyBucket(enc); kb != b^1 {
			t.Fatalf("WithBucket did not rewrite the bucket")
		}
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// TestKeyOrder: bytewise order of encoded keys is (bucket, state, key
// length, key, sub-key), the order the format promises.
func TestKeyOrder(t *testing.T) {
	ordered := [][]byte{
		EncodeKey(0, 0, nil, nil),
		EncodeKey(0, 1, nil, nil),
		EncodeKey(0, 1, []byte("z"), nil),
		EncodeKey(0, 1, []byte("z"), []byte{0}),
		EncodeKey(0, 1, []byte("aa"), nil),
		EncodeKey(0, 2, []byte("a"), nil),
		EncodeKey(1, 0, nil, nil),
		EncodeKey(256, 0, nil, nil),
		EncodeKey(1<<24, 0, nil, nil),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Errorf("key %d (%x) is not below key %d (%x)", i-1, ordered[i-1], i, ordered[i])
		}
	}
	// The length prefix keeps key "ab"+sub "c" apart from key "a"+sub "bc".
	if bytes.Equal(EncodeKey(0, 0, []byte("ab"), []byte("c")), EncodeKey(0, 0, []byte("a"), []byte("bc"))) {
		t.Error("ambiguous encoding")
	}
}

func TestDecodeKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short header", make([]byte, KeyHeaderLen-1)},
		{"length past end", []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 'a'}},
		{"huge length", []byte{0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeKey(tc.in); !errors.Is(err, ErrCorrupt) {
				t.Errorf("DecodeKey(%x) = %v, want ErrCorrupt", tc.in, err)
			}
		})
	}
	if _, ok := KeyBucket([]byte{1, 2, 3}); ok {
		t.Error("KeyBucket accepted a 3-byte key")
	}
}

func TestDecodeKeyAllocs(t *testing.T) {
	enc := EncodeKey(7, 2, []byte("user-1"), []byte("sub"))
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = DecodeKey(enc)
	})
	if allocs != 0 {
		t.Errorf("DecodeKey allocates %v times per call, want 0", allocs)
	}
}

func TestBucketBounds(t *testing.T) {
	if !bytes.Equal(BucketPrefix(0x01020304), []byte{1, 2, 3, 4}) {
		t.Error("BucketPrefix")
	}
	if !bytes.Equal(BucketUpperBound(5), BucketPrefix(6)) {
		t.Error("BucketUpperBound(5)")
	}
	if BucketUpperBound(^uint32(0)) != nil {
		t.Error("BucketUpperBound(max) must be unbounded")
	}
	// Every key of bucket b lies in [prefix(b), upper(b)).
	for _, b := range []uint32{0, 1, 65535} {
		for _, k := range [][]byte{EncodeKey(b, 0, nil, nil), EncodeKey(b, 0xffff, bytes.Repeat([]byte{0xff}, 50), []byte{0xff})} {
			if bytes.Compare(k, BucketPrefix(b)) < 0 || bytes.Compare(k, BucketUpperBound(b)) >= 0 {
				t.Errorf("key %x outside bucket %d bounds", k, b)
			}
		}
	}
}
