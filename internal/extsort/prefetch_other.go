//go:build !amd64

package extsort

// prefetch is a no-op where no prefetch instruction is wired up.
func prefetch(*byte) {}
