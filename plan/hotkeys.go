package plan

import (
	"container/heap"
	"context"
	"encoding/hex"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/rebucket/rebucket/internal/progress"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// DominantShare is the share of its bucket above which one key is said to
// dominate it: more buckets cannot spread a single key, so such a bucket
// stays hot whatever the count.
const DominantShare = 0.5

// HotKey is one user key's weight in the snapshot, summed across every
// state and sub-key (bytes are logical: encoded key plus value).
type HotKey struct {
	Key         string  `json:"key"` // printable UTF-8, else 0x-prefixed hex
	KeyHex      string  `json:"key_hex"`
	Bucket      uint32  `json:"bucket"`
	Entries     uint64  `json:"entries"`
	Bytes       uint64  `json:"bytes"`
	BucketBytes uint64  `json:"bucket_bytes"`
	Share       float64 `json:"share_of_bucket"`
}

// HotKeys is the result of TopKeys.
type HotKeys struct {
	Top []HotKey `json:"top"`
	// Dominant lists, per bucket at least as large as the mean bucket, its
	// heaviest key when that key takes at least DominantShare of it.
	Dominant []HotKey `json:"dominant"`
	Scanned  uint64   `json:"entries_scanned"`
}

// TopKeys scans every entry of the snapshot (in parallel over bucket
// ranges) and names the k heaviest keys by bytes.
//
// Memory: all of a key's entries lie in one bucket, but within it they are
// spread across states, so the scan sums per key in a map that holds one
// bucket's keys at a time (per goroutine), and keeps only the k heaviest
// overall. The bound is therefore the number of distinct keys of the
// largest bucket, not of the snapshot: at 10 million distinct keys in one
// bucket that is about a gigabyte; a snapshot like that wants more buckets
// first.
// MaxTopKeys bounds k: every scanning worker holds k keys at once.
const MaxTopKeys = 10_000

func TopKeys(ctx context.Context, s *reader.Snapshot, k, parallel int, prog progress.Reporter) (*HotKeys, error) {
	if k < 1 || k > MaxTopKeys {
		return nil, fmt.Errorf("%w: --top-keys %d: want 1..%d", snapshotfmt.ErrInvalidArgument, k, MaxTopKeys)
	}
	if parallel < 1 {
		parallel = runtime.GOMAXPROCS(0)
	}
	prog = progress.OrNop(prog)
	m := s.Manifest()
	n := len(m.BucketBytes)
	total := m.TotalBytes()
	prog.Start(int64(total), "scanning keys")
	defer prog.Finish()
	mean := float64(total) / float64(max(n, 1))

	// Cut the buckets into jobs of about total/(4*parallel) bytes each, so
	// that one large bucket does not leave the other goroutines idle long.
	type job struct{ lo, hi uint32 }
	var jobs []job
	target := total/uint64(4*parallel) + 1
	for b := 0; b < n; {
		lo := b
		var sz uint64
		for b < n && (b == lo || sz+m.BucketBytes[b] <= target) {
			sz += m.BucketBytes[b]
			b++
		}
		jobs = append(jobs, job{uint32(lo), uint32(b - 1)})
	}
	ch := make(chan job)
	var mu sync.Mutex
	global := &keyHeap{}
	var dominant []HotKey
	var scanned uint64
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(ch)
		for _, j := range jobs {
			select {
			case ch <- j:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range parallel {
		g.Go(func() error {
			local := &keyHeap{}
			var localDom []HotKey
			var localScanned uint64
			sums := map[string]*HotKey{}
			cur := int64(-1)
			flush := func() {
				if cur < 0 {
					return
				}
				bb := m.BucketBytes[cur]
				var top *HotKey
				for _, hk := range sums {
					hk.BucketBytes = bb
					if bb > 0 {
						hk.Share = float64(hk.Bytes) / float64(bb)
					}
					if top == nil || hk.Bytes > top.Bytes || (hk.Bytes == top.Bytes && hk.KeyHex < top.KeyHex) {
						top = hk
					}
					pushTop(local, *hk, k)
				}
				if top != nil && top.Share >= DominantShare && float64(bb) >= mean {
					localDom = append(localDom, *top)
				}
				clear(sums)
			}
			for j := range ch {
				it := s.NewIter(gctx, j.lo, j.hi)
				var done int64
				for it.Next() {
					dk, err := snapshotfmt.DecodeKey(it.Key())
					if err != nil {
						it.Close()
						return err
					}
					if int64(dk.Bucket) != cur {
						flush()
						cur = int64(dk.Bucket)
					}
					sz := uint64(len(it.Key()) + len(it.Value()))
					hk := sums[string(dk.Key)]
					if hk == nil {
						hk = &HotKey{KeyHex: hex.EncodeToString(dk.Key), Key: displayKey(dk.Key), Bucket: dk.Bucket}
						sums[string(dk.Key)] = hk
					}
					hk.Entries++
					hk.Bytes += sz
					localScanned++
					done += int64(sz)
					if done >= 1<<20 {
						prog.Add(done)
						done = 0
					}
				}
				prog.Add(done)
				err := it.Err()
				it.Close()
				if err != nil {
					return err
				}
				flush()
				cur = -1
			}
			mu.Lock()
			defer mu.Unlock()
			for _, hk := range *local {
				pushTop(global, hk, k)
			}
			dominant = append(dominant, localDom...)
			scanned += localScanned
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := &HotKeys{Top: []HotKey(*global), Dominant: dominant, Scanned: scanned}
	sort.Slice(out.Top, func(a, b int) bool { return heavier(out.Top[a], out.Top[b]) })
	sort.Slice(out.Dominant, func(a, b int) bool { return out.Dominant[a].Bucket < out.Dominant[b].Bucket })
	if out.Dominant == nil {
		out.Dominant = []HotKey{}
	}
	if out.Top == nil {
		out.Top = []HotKey{}
	}
	return out, nil
}

// DominanceWarnings words the dominant keys for people.
func (h *HotKeys) DominanceWarnings() []string {
	var out []string
	for _, d := range h.Dominant {
		out = append(out, fmt.Sprintf("key %s takes %.0f%% of bucket %d (%d of %d bytes): more buckets will not spread a single key; whichever worker owns it carries it",
			d.Key, 100*d.Share, d.Bucket, d.Bytes, d.BucketBytes))
	}
	return out
}

func heavier(a, b HotKey) bool {
	if a.Bytes != b.Bytes {
		return a.Bytes > b.Bytes
	}
	return a.KeyHex < b.KeyHex
}

// keyHeap is a min-heap by weight: its root is the lightest kept key.
type keyHeap []HotKey

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return heavier(h[j], h[i]) }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(HotKey)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func pushTop(h *keyHeap, hk HotKey, k int) {
	if h.Len() < k {
		heap.Push(h, hk)
		return
	}
	if heavier(hk, (*h)[0]) {
		(*h)[0] = hk
		heap.Fix(h, 0)
	}
}

// displayKey shows a key as text when it is printable UTF-8, else as hex.
func displayKey(k []byte) string {
	if utf8.Valid(k) {
		ok := true
		for _, r := range string(k) {
			if !unicode.IsPrint(r) {
				ok = false
				break
			}
		}
		if ok && len(k) > 0 {
			return string(k)
		}
	}
	return "0x" + hex.EncodeToString(k)
}
