package keytype

import "math/bits"

// MurmurHash is org.apache.flink.util.MathUtils.murmurHash: one murmur3
// round over the int, the fmix finaliser (bitMix), then the absolute value
// (Integer.MIN_VALUE maps to 0). The result is never negative.
func MurmurHash(code int32) int32 {
	c := uint32(code)
	c *= 0xcc9e2d51
	c = bits.RotateLeft32(c, 15)
	c *= 0x1b873593
	c = bits.RotateLeft32(c, 13)
	c = c*5 + 0xe6546b64
	c ^= 4
	c = bitMix(c)
	v := int32(c)
	switch {
	case v >= 0:
		return v
	case v != -1<<31:
		return -v
	default:
		return 0
	}
}

// bitMix is MathUtils.bitMix (murmur3's fmix32).
func bitMix(in uint32) uint32 {
	in ^= in >> 16
	in *= 0x85ebca6b
	in ^= in >> 13
	in *= 0xc2b2ae35
	in ^= in >> 16
	return in
}

// KeyGroup is KeyGroupRangeAssignment.computeKeyGroupForKeyHash: the key
// group of a key whose Java hashCode() is hashCode, for maxParallelism key
// groups. maxParallelism must be valid (ValidMaxParallelism).
func KeyGroup(hashCode int32, maxParallelism int) int {
	return int(MurmurHash(hashCode)) % maxParallelism
}

// OperatorIndex is KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup:
// the subtask that owns keyGroup at the given parallelism.
func OperatorIndex(keyGroup, maxParallelism, parallelism int) int {
	return keyGroup * parallelism / maxParallelism
}

// KeyGroupRange is KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex:
// the inclusive key-group range [start, end] of subtask operatorIndex. When
// parallelism > maxParallelism (which Flink refuses) some ranges are empty
// (end < start).
func KeyGroupRange(operatorIndex, maxParallelism, parallelism int) (start, end int) {
	start = (operatorIndex*maxParallelism + parallelism - 1) / parallelism
	end = ((operatorIndex+1)*maxParallelism - 1) / parallelism
	return start, end
}

// PrefixBytes is CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix:
// every key in keyed state starts with its key group in 1 byte when
// maxParallelism <= 128, else in 2 bytes (big-endian).
func PrefixBytes(maxParallelism int) int {
	if maxParallelism > 128 {
		return 2
	}
	return 1
}

// MaxParallelismUpperBound is Flink's upper bound for max parallelism
// (Transformation.UPPER_BOUND_MAX_PARALLELISM = 1 << 15).
const MaxParallelismUpperBound = 1 << 15

// ValidMaxParallelism reports whether m is a max parallelism Flink accepts
// (KeyGroupRangeAssignment.checkParallelismPreconditions: 1..32768). KeyGroup
// and the range functions need one; check values read from a savepoint or a
// flag with it first.
func ValidMaxParallelism(m int) bool { return m >= 1 && m <= MaxParallelismUpperBound }
