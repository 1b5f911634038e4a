package spark

import (
	"context"
	"path/filepath"
	"testing"
)

func BenchmarkRewrite200k(b *testing.B) {
	src := filepath.Join(b.TempDir(), "ck")
	if err := Generate(src, GenerateOptions{Keys: 200000, Partitions: 2}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(b.TempDir(), "out")
		if _, err := Rewrite(context.Background(), src, dst, RewriteOptions{Partitions: 8}); err != nil {
			b.Fatal(err)
		}
	}
}
