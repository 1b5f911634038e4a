package extsort

// prefetch asks the CPU to bring the cache line at p into cache without
// waiting for it (PREFETCHT0): unlike a load, it never stalls retirement.
//
//go:noescape
func prefetch(p *byte)
