package rocksdbsst
import ("testing";"bytes";"math/rand";"path/filepath";"time";"os")
func TestScratchMut(t *testing.T){
	seeds, _ := filepath.Glob("testdata/*.sst")
	maxBlockSize = 1<<22
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 3000; i++ {
		b := mustRead(t, seeds[rng.Intn(len(seeds))])
		for j := 0; j < 1+rng.Intn(4); j++ { b[rng.Intn(len(b))] = byte(rng.Intn(256)) }
		start := time.Now()
		done := make(chan bool)
		go func(){
			select { case <-done: case <-time.After(3*time.Second): os.WriteFile("/tmp/slow.bin", b, 0644); panic("slow") }
		}()
		tb, err := open(bytes.NewReader(b), int64(len(b)), false)
		if err == nil {
			it := tb.NewIter(); for it.Next() {}
			tb.RangeDeletions()
			Live([]*Table{tb, tb}, StringAppend([]byte(",")), func(k, v []byte) error { return nil })
		}
		close(done)
		if d := time.Since(start); d > 100*time.Millisecond { t.Log(i, d) }
	}
}
