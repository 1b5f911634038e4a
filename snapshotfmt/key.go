package snapshotfmt

import (
	"encoding/binary"
	"fmt"
)

// Encoded key layout (all integers big-endian, so bytewise order is numeric
// order within each field):
//
//	bucket   uint32   4 bytes
//	state    uint16   2 bytes
//	keylen   uint32   4 bytes
//	key      keylen bytes
//	subkey   the rest (map state only; may be empty)
const (
	KeyHeaderLen = 10
	// MaxKeyLen bounds one key so a damaged length never drives a large
	// allocation; 64 MiB is far above any real state key.
	MaxKeyLen = 64 << 20
)

// AppendKey appends the encoded form of (bucket, state, key, subKey) to dst.
// subKey is nil for value and list state.
func AppendKey(dst []byte, bucket uint32, state uint16, key, subKey []byte) []byte {
	var hdr [KeyHeaderLen]byte
	binary.BigEndian.PutUint32(hdr[0:4], bucket)
	binary.BigEndian.PutUint16(hdr[4:6], state)
	binary.BigEndian.PutUint32(hdr[6:10], uint32(len(key)))
	dst = append(dst, hdr[:]...)
	dst = append(dst, key...)
	return append(dst, subKey...)
}

// EncodeKey returns the encoded form of (bucket, state, key, subKey).
func EncodeKey(bucket uint32, state uint16, key, subKey []byte) []byte {
	return AppendKey(make([]byte, 0, KeyHeaderLen+len(key)+len(subKey)), bucket, state, key, subKey)
}

// DecodedKey is an encoded key split into its fields. Key and SubKey alias
// the input.
type DecodedKey struct {
	Bucket uint32
	State  uint16
	Key    []byte
	SubKey []byte
}

// DecodeKey splits an encoded key. It never panics and never allocates.
func DecodeKey(enc []byte) (DecodedKey, error) {
	if len(enc) < KeyHeaderLen {
		return DecodedKey{}, fmt.Errorf("%w: encoded key of %d bytes is shorter than its %d-byte header", ErrCorrupt, len(enc), KeyHeaderLen)
	}
	n := binary.BigEndian.Uint32(enc[6:10])
	if uint64(n) > uint64(len(enc)-KeyHeaderLen) {
		return DecodedKey{}, fmt.Errorf("%w: encoded key claims a %d-byte key but has %d bytes after its header", ErrCorrupt, n, len(enc)-KeyHeaderLen)
	}
	end := KeyHeaderLen + int(n)
	return DecodedKey{
		Bucket: binary.BigEndian.Uint32(enc[0:4]),
		State:  binary.BigEndian.Uint16(enc[4:6]),
		Key:    enc[KeyHeaderLen:end:end],
		SubKey: enc[end:],
	}, nil
}

// KeyBucket reads only the bucket of an encoded key (no validation beyond
// length); the hot routing path uses it.
func KeyBucket(enc []byte) (uint32, bool) {
	if len(enc) < KeyHeaderLen {
		return 0, false
	}
	return binary.BigEndian.Uint32(enc[0:4]), true
}

// WithBucket rewrites the bucket field of an encoded key in place.
func WithBucket(enc []byte, bucket uint32) {
	binary.BigEndian.PutUint32(enc[0:4], bucket)
}

// BucketPrefix returns the 4-byte prefix that every key of bucket b starts
// with; keys of buckets lo..hi lie in [BucketPrefix(lo), BucketPrefix(hi+1)).
func BucketPrefix(b uint32) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], b)
	return p[:]
}

// BucketUpperBound returns the exclusive upper bound of the keys of buckets
// up to and including hi.
func BucketUpperBound(hi uint32) []byte {
	if hi == ^uint32(0) {
		return nil
	}
	return BucketPrefix(hi + 1)
}
