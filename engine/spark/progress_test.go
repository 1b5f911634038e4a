package spark

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

type recProgress struct {
	mu            sync.Mutex
	total, added  int64
	starts, ended int
}

func (p *recProgress) Start(total int64, what string) {
	p.mu.Lock()
	p.total = total
	p.starts++
	p.mu.Unlock()
}
func (p *recProgress) Add(n int64) { p.mu.Lock(); p.added += n; p.mu.Unlock() }
func (p *recProgress) Finish()     { p.mu.Lock(); p.ended++; p.mu.Unlock() }

// Progress counts the state bytes read and ends where it said it would.
func TestProgressAddsUpToTotal(t *testing.T) {
	src := realDir(t, "session")
	p := &recProgress{}
	if _, err := Rewrite(context.Background(), src, filepath.Join(t.TempDir(), "o"), RewriteOptions{Partitions: 4, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if p.starts != 1 || p.ended != 1 || p.total == 0 || p.added != p.total {
		t.Fatalf("%+v", p)
	}
	p = &recProgress{}
	if _, err := Verify(context.Background(), src, ScanOptions{Progress: p}); err != nil {
		t.Fatal(err)
	}
	if p.total == 0 || p.added != p.total {
		t.Fatalf("verify %+v", p)
	}
}
