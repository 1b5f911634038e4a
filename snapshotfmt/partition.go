package snapshotfmt

import (
	"fmt"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// HashName is the only key hash of format v1: XXH3-64 with seed 0.
const HashName = "xxh3-64"

// Bucket count bounds. Above WarnBuckets every tool warns about the
// per-bucket bookkeeping cost.
const (
	MinBuckets  = 1
	MaxBuckets  = 65536
	WarnBuckets = 32768
)

// Mapping names how a key hash becomes a bucket.
type Mapping string

const (
	// MappingMod is bucket = h mod N, the form Flink, Spark and Kafka use.
	MappingMod Mapping = "mod"
	// MappingRange is bucket = floor(h*N / 2^64): buckets are contiguous
	// slices of hash space.
	MappingRange Mapping = "range"
)

// ParseMapping accepts "mod" or "range".
func ParseMapping(s string) (Mapping, error) {
	switch Mapping(s) {
	case MappingMod, MappingRange:
		return Mapping(s), nil
	}
	return "", fmt.Errorf("%w: mapping %q: want mod or range", ErrInvalidArgument, s)
}

// HashKey is the fixed key hash: XXH3-64, seed 0, of the key bytes only.
func HashKey(key []byte) uint64 { return xxh3.Hash(key) }

// Partitioning is how a snapshot deals keys into buckets.
type Partitioning struct {
	Hash    string  `json:"hash"`
	Mapping Mapping `json:"mapping"`
	Buckets uint32  `json:"buckets"`
}

// NewPartitioning checks the bucket count and mapping.
func NewPartitioning(mapping Mapping, buckets int) (Partitioning, error) {
	p := Partitioning{Hash: HashName, Mapping: mapping, Buckets: uint32(buckets)}
	if buckets < MinBuckets || buckets > MaxBuckets {
		return Partitioning{}, fmt.Errorf("%w: bucket count %d outside %d..%d", ErrInvalidArgument, buckets, MinBuckets, MaxBuckets)
	}
	if _, err := ParseMapping(string(mapping)); err != nil {
		return Partitioning{}, err
	}
	return p, nil
}

// Validate reports a partitioning this format cannot use.
func (p Partitioning) Validate() error {
	if p.Hash != HashName {
		return fmt.Errorf("%w: partitioning.hash %q: only %q is defined", ErrCorrupt, p.Hash, HashName)
	}
	if p.Mapping != MappingMod && p.Mapping != MappingRange {
		return fmt.Errorf("%w: partitioning.mapping %q: want mod or range", ErrCorrupt, p.Mapping)
	}
	if p.Buckets < MinBuckets || p.Buckets > MaxBuckets {
		return fmt.Errorf("%w: partitioning.buckets %d outside %d..%d", ErrCorrupt, p.Buckets, MinBuckets, MaxBuckets)
	}
	return nil
}

// BucketOfHash maps a key hash to its bucket.
func (p Partitioning) BucketOfHash(h uint64) uint32 {
	if p.Mapping == MappingRange {
		hi, _ := bits.Mul64(h, uint64(p.Buckets))
		return uint32(hi)
	}
	return uint32(h % uint64(p.Buckets))
}

// Bucket maps a key to its bucket.
func (p Partitioning) Bucket(key []byte) uint32 { return p.BucketOfHash(HashKey(key)) }

func (p Partitioning) String() string {
	return fmt.Sprintf("%s %s/%d", p.Hash, p.Mapping, p.Buckets)
}
