package rocksdbsst

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A flipped byte in the bloom filter block is not read by Open or by an
// iteration; VerifyMetaBlocks finds it.
func TestVerifyMetaBlocksFindsDamagedFilter(t *testing.T) {
	ssts, _ := filepath.Glob("../../engine/spark/testdata/interop/rocksdb/checkpoint/state/0/0/SSTs/*.sst")
	if len(ssts) == 0 {
		t.Fatal("no Spark SST")
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.VerifyMetaBlocks(); err != nil {
		t.Fatalf("undamaged: %v", err)
	}
	var filter blockHandle
	for name, h := range tab.meta {
		if strings.Contains(name, "filter") {
			filter = h
		}
	}
	if filter.size == 0 {
		t.Fatalf("no filter block in %v", tab.meta)
	}
	d := bytes.Clone(b)
	d[filter.offset+filter.size/2] ^= 0x10
	tab, err = Open(bytes.NewReader(d), int64(len(d)))
	if err != nil {
		t.Fatalf("Open read the filter block: %v", err)
	}
	it := tab.NewIter()
	for it.Next() {
	}
	if it.Err() != nil {
		t.Fatalf("iteration read the filter block: %v", it.Err())
	}
	if err := tab.VerifyMetaBlocks(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "filter") {
		t.Fatalf("damaged filter: %v", err)
	}
}
