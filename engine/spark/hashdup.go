package spark

// hashSeen collects 64-bit key hashes and says whether one came twice.
// Sorting millions of hashes costs more than reading the rows; instead
// they are kept in 256 buckets by their top 8 bits (a uniform hash fills
// them evenly) and each bucket is checked on its own with a small
// open-addressing set that stays in cache. A bucket is a list of fixed
// chunks, so growing it copies nothing and leaves no garbage: 8 bytes a
// hash and at most one partly filled chunk per bucket.
type hashSeen struct {
	b   [256][][]uint64
	set []uint64
}

const seenChunk = 4096

func (s *hashSeen) add(h uint64) {
	cs := s.b[h>>56]
	if len(cs) == 0 || len(cs[len(cs)-1]) == seenChunk {
		cs = append(cs, make([]uint64, 0, seenChunk))
		s.b[h>>56] = cs
	}
	last := &cs[len(cs)-1]
	*last = append(*last, h)
}

// hasDup says whether a hash was added twice.
func (s *hashSeen) hasDup() bool {
	for _, bucket := range s.b {
		if dupIn(bucket, &s.set) {
			return true
		}
	}
	return false
}

// dupIn says whether the chunks hold a value twice, using *set (reused) as a
// linear-probing table of at least twice len(hs) slots; 0 marks an empty
// slot, so a hash of 0 is counted apart.
func dupIn(chunks [][]uint64, set *[]uint64) bool {
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	n := 16
	for n < 2*total {
		n *= 2
	}
	if cap(*set) < n {
		*set = make([]uint64, n)
	}
	t := (*set)[:n]
	clear(t)
	mask := uint64(n - 1)
	zeros := 0
	for _, c := range chunks {
		for _, h := range c {
			if h == 0 {
				if zeros++; zeros > 1 {
					return true
				}
				continue
			}
			for i := h & mask; ; i = (i + 1) & mask {
				if t[i] == 0 {
					t[i] = h
					break
				}
				if t[i] == h {
					return true
				}
			}
		}
	}
	return false
}
