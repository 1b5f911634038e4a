package keytype

// Helpers for the composite keys of keyed state
// (org.apache.flink.runtime.state.CompositeKeySerializationUtils):
// keyGroupPrefix | key [| key length] | namespace [| namespace length] [| map user key].

// AppendKeyGroupPrefix appends keyGroup as PrefixBytes(maxParallelism)
// big-endian bytes (writeKeyGroup).
func AppendKeyGroupPrefix(dst []byte, keyGroup, maxParallelism int) []byte {
	if PrefixBytes(maxParallelism) == 2 {
		return append(dst, byte(keyGroup>>8), byte(keyGroup))
	}
	return append(dst, byte(keyGroup))
}

// ReadKeyGroupPrefix reads the key-group prefix at the start of a composite
// key. The caller clears FullSnapshotUtil's 0x80 "meta data follows" flag of
// the first byte before calling (it shares the prefix's top bit).
func ReadKeyGroupPrefix(b []byte, maxParallelism int) (keyGroup int, err error) {
	n := PrefixBytes(maxParallelism)
	if len(b) < n {
		return 0, corruptf("key-group prefix truncated: %d of %d bytes", len(b), n)
	}
	if n == 2 {
		return int(b[0])<<8 | int(b[1]), nil
	}
	return int(b[0]), nil
}

// AmbiguousKeyPossible is CompositeKeySerializationUtils.isAmbiguousKeyPossible:
// when both the key and the namespace serializer are variable-sized
// (getLength() < 0), each is followed by its length (LengthSuffixLen).
// Pass FixedLen() of the key codec and the namespace serializer's
// getLength() (VoidNamespaceSerializer says 0, though it writes one byte).
func AmbiguousKeyPossible(keyFixedLen, namespaceFixedLen int) bool {
	return keyFixedLen < 0 && namespaceFixedLen < 0
}

// LengthSuffixLen is how many bytes writeVariableIntBytes uses for the
// length n of a key or namespace: n little-endian, one byte at least, as
// many as n needs. Readers skip exactly that many (readVariableIntBytes).
func LengthSuffixLen(n int) int {
	v := uint32(n)
	k := 0
	for {
		k++
		v >>= 8
		if v == 0 {
			return k
		}
	}
}

// AppendLengthSuffix is writeVariableIntBytes(n).
func AppendLengthSuffix(dst []byte, n int) []byte {
	v := uint32(n)
	for {
		dst = append(dst, byte(v))
		v >>= 8
		if v == 0 {
			return dst
		}
	}
}
