package xxh32

import "testing"

// Reference values of the xxHash32 specification's implementation
// (the Python xxhash package), at every length class: empty, under 4, under 16,
// and over 16 bytes (the four-lane loop), with seeds 0, 1 and lz4-java's.
func TestChecksum(t *testing.T) {
	ramp := make([]byte, 768)
	for i := range ramp {
		ramp[i] = byte(i)
	}
	const lz4javaSeed = 0x9747b28c
	for _, tc := range []struct {
		in   []byte
		seed uint32
		want uint32
	}{
		{nil, 0, 0x02cc5d05},
		{[]byte("a"), 0, 0x550d7456},
		{[]byte("abc"), 0, 0x32d153ff},
		{[]byte("Nobody inspects the spammish repetition"), 0, 0xe2293b2f},
		{nil, lz4javaSeed, 0x8d3b42d8},
		{[]byte("hello world, this is more than sixteen bytes"), lz4javaSeed, 0x4529310b},
		{ramp, lz4javaSeed, 0xeaa85739},
		{[]byte("abcd"), 1, 0xbe6e299f},
	} {
		if got := Checksum(tc.in, tc.seed); got != tc.want {
			t.Errorf("Checksum(%q, %#x) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
	}
}
