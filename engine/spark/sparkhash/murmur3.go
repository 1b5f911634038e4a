// Package sparkhash is Spark SQL's hash partitioning: Murmur3Hash (Spark's
// Murmur3_x86_32, seed 42, chained over the key columns) and pmod. It is
// what HashPartitioning, and so a stateful operator's state partition, uses.
package sparkhash

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Seed is the seed of Murmur3Hash in HashPartitioning.
const Seed int32 = 42

const (
	c1 uint32 = 0xcc9e2d51
	c2 uint32 = 0x1b873593
)

func mixK1(k1 uint32) uint32 {
	k1 *= c1
	k1 = bits.RotateLeft32(k1, 15)
	return k1 * c2
}

func mixH1(h1, k1 uint32) uint32 {
	h1 ^= k1
	h1 = bits.RotateLeft32(h1, 13)
	return h1*5 + 0xe6546b64
}

func fmix(h1 uint32, length uint32) uint32 {
	h1 ^= length
	h1 ^= h1 >> 16
	h1 *= 0x85ebca6b
	h1 ^= h1 >> 13
	h1 *= 0xc2b2ae35
	h1 ^= h1 >> 16
	return h1
}

// HashInt is Murmur3_x86_32.hashInt.
func HashInt(v, seed int32) int32 {
	return int32(fmix(mixH1(uint32(seed), mixK1(uint32(v))), 4))
}

// HashLong is Murmur3_x86_32.hashLong: low word, then high word.
func HashLong(v int64, seed int32) int32 {
	h1 := mixH1(uint32(seed), mixK1(uint32(v)))
	h1 = mixH1(h1, mixK1(uint32(uint64(v)>>32)))
	return int32(fmix(h1, 8))
}

// HashBytes is Murmur3_x86_32.hashUnsafeBytes: little-endian 4-byte words,
// then each tail byte on its own, sign-extended (Spark's pre-2.3 variant,
// not the reference murmur3 tail).
func HashBytes(b []byte, seed int32) int32 {
	h1 := uint32(seed)
	n := len(b)
	aligned := n - n%4
	for i := 0; i < aligned; i += 4 {
		h1 = mixH1(h1, mixK1(binary.LittleEndian.Uint32(b[i:])))
	}
	for i := aligned; i < n; i++ {
		h1 = mixH1(h1, mixK1(uint32(int32(int8(b[i])))))
	}
	return int32(fmix(h1, uint32(n)))
}

// HashFloat64 hashes a double as Spark does: -0.0 as 0, NaN canonical
// (Double.doubleToLongBits).
func HashFloat64(d float64, seed int32) int32 {
	if d == 0 {
		return HashLong(0, seed)
	}
	if d != d {
		return HashLong(0x7ff8000000000000, seed)
	}
	return HashLong(int64(math.Float64bits(d)), seed)
}

// HashFloat32 hashes a float as Spark does: -0.0 as 0, NaN canonical.
func HashFloat32(f float32, seed int32) int32 {
	if f == 0 {
		return HashInt(0, seed)
	}
	if f != f {
		return HashInt(0x7fc00000, seed)
	}
	return HashInt(int32(math.Float32bits(f)), seed)
}

// Pmod is Spark's pmod(h, n) for n > 0.
func Pmod(h int32, n int) int {
	if n > 0 && n <= math.MaxInt32 {
		// A 32-bit division: several times cheaper than a 64-bit one on
		// older x86, and Pmod runs for every row; the same result.
		r := h % int32(n)
		if r < 0 {
			r += int32(n)
		}
		return int(r)
	}
	r := int(h) % n
	if r < 0 {
		r += n
	}
	return r
}

// Supported says whether values of type t can be hashed here, naming the
// first type that cannot.
func Supported(t *unsaferow.Type) error {
	switch t.Kind {
	case unsaferow.Boolean, unsaferow.Byte, unsaferow.Short, unsaferow.Int, unsaferow.Date,
		unsaferow.Long, unsaferow.Timestamp, unsaferow.TimestampNTZ, unsaferow.Float,
		unsaferow.Double, unsaferow.Decimal, unsaferow.String, unsaferow.Binary, unsaferow.Null:
		return nil
	case unsaferow.Struct:
		for _, f := range t.Fields {
			if err := Supported(f.Type); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: cannot hash Spark type %s", snapshotfmt.ErrUnsupported, t)
}

// HashField chains field i of row r (of type t) into seed; a null field
// leaves the seed as it is.
func HashField(t *unsaferow.Type, r unsaferow.Row, i int, seed int32) (int32, error) {
	if r.IsNull(i) || t.Kind == unsaferow.Null {
		return seed, nil
	}
	switch t.Kind {
	case unsaferow.Boolean:
		if r.Bool(i) {
			return HashInt(1, seed), nil
		}
		return HashInt(0, seed), nil
	case unsaferow.Byte:
		return HashInt(int32(r.Int8(i)), seed), nil
	case unsaferow.Short:
		return HashInt(int32(r.Int16(i)), seed), nil
	case unsaferow.Int, unsaferow.Date:
		return HashInt(r.Int32(i), seed), nil
	case unsaferow.Long, unsaferow.Timestamp, unsaferow.TimestampNTZ:
		return HashLong(r.Int64(i), seed), nil
	case unsaferow.Float:
		return HashFloat32(r.Float32(i), seed), nil
	case unsaferow.Double:
		return HashFloat64(r.Float64(i), seed), nil
	case unsaferow.Decimal:
		if t.Compact() {
			return HashLong(r.Int64(i), seed), nil
		}
		// The unscaled value's BigInteger.toByteArray, which is what the
		// row holds (Spark writes exactly that array).
		b, err := r.Var(i)
		if err != nil {
			return 0, err
		}
		return HashBytes(b, seed), nil
	case unsaferow.String, unsaferow.Binary:
		b, err := r.Var(i)
		if err != nil {
			return 0, err
		}
		return HashBytes(b, seed), nil
	case unsaferow.Struct:
		nr, err := r.Struct(i, len(t.Fields))
		if err != nil {
			return 0, err
		}
		return HashRow(t, nr, nil, seed)
	}
	return 0, fmt.Errorf("%w: cannot hash Spark type %s", snapshotfmt.ErrUnsupported, t)
}

// HashRow chains the fields cols (all fields when cols is nil) of row r of
// struct type t into seed, as Murmur3Hash(cols..., seed) does.
func HashRow(t *unsaferow.Type, r unsaferow.Row, cols []int, seed int32) (int32, error) {
	h := seed
	var err error
	if cols == nil {
		for i, f := range t.Fields {
			if h, err = HashField(f.Type, r, i, h); err != nil {
				return 0, err
			}
		}
		return h, nil
	}
	for _, i := range cols {
		if h, err = HashField(t.Fields[i].Type, r, i, h); err != nil {
			return 0, err
		}
	}
	return h, nil
}

// Partition is pmod(Murmur3Hash(cols of the row, 42), n): the state
// partition Spark puts a key row in.
func Partition(t *unsaferow.Type, row []byte, cols []int, n int) (int, error) {
	r, err := unsaferow.NewRow(row, len(t.Fields))
	if err != nil {
		return 0, err
	}
	h, err := HashRow(t, r, cols, Seed)
	if err != nil {
		return 0, err
	}
	return Pmod(h, n), nil
}
