package plan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/rebucket/rebucket/reader"
)

// ScanRate is a throughput measured on this machine by copying part of a
// snapshot: Bytes of data files (on-disk size) checksummed, decoded, and
// encoded again into a table (snappy, as the writer does, output
// discarded) in Elapsed, by one goroutine.
type ScanRate struct {
	Bytes          int64         `json:"bytes"`
	Entries        uint64        `json:"entries"`
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	Files          int           `json:"files"`
}

// discard is a table sink that keeps nothing.
type discard struct{}

func (discard) Write([]byte) error { return nil }
func (discard) Finish() error      { return nil }
func (discard) Abort()             {}

// BytesPerSecond is the measured rate (0 when nothing was read).
func (r ScanRate) BytesPerSecond() float64 {
	if r.Elapsed <= 0 || r.Bytes == 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds()
}

// MeasureScanRate copies whole data files of the snapshot (read, decode,
// encode into a discarded table), first to last, until about limit bytes
// or a second have passed, and times it. It is the figure the rewrite
// estimate is built on: a rewrite's work is dominated by reading,
// rehashing and writing the same bytes.
func MeasureScanRate(ctx context.Context, s *reader.Snapshot, limit int64) (ScanRate, error) {
	var r ScanRate
	start := time.Now()
	for _, df := range s.Manifest().Files {
		if r.Bytes >= limit || (r.Files > 0 && time.Since(start) > time.Second) {
			break
		}
		fi, err := s.OpenFile(ctx, df, nil, nil)
		if err != nil {
			return r, err
		}
		w := sstable.NewWriter(discard{}, sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev4, Compression: sstable.SnappyCompression})
		for fi.Next() {
			if err = w.Set(fi.Key(), fi.Value()); err != nil {
				break
			}
			r.Entries++
		}
		if err == nil {
			err = fi.Err()
		}
		if e := w.Close(); err == nil {
			err = e
		}
		fi.Close()
		if err != nil {
			return r, err
		}
		r.Bytes += df.Size
		r.Files++
	}
	r.Elapsed = time.Since(start)
	r.ElapsedSeconds = r.Elapsed.Seconds()
	return r, nil
}

// DiskRate is a write throughput measured on this machine: Bytes written
// to a new file and fsynced in Elapsed, and the time of one fsync of a
// small new file (the cost every data file of a rewrite pays once).
type DiskRate struct {
	Dir              string        `json:"dir"`
	Bytes            int64         `json:"bytes"`
	Elapsed          time.Duration `json:"-"`
	FileFsync        time.Duration `json:"-"`
	ElapsedSeconds   float64       `json:"elapsed_seconds"`
	FileFsyncSeconds float64       `json:"file_fsync_seconds"`
}

// MeasureDisk writes and fsyncs a 16 MiB file and a small one in dir (a
// temporary directory there, removed afterwards).
func MeasureDisk(dir string) (DiskRate, error) {
	r := DiskRate{Dir: dir}
	tmp, err := os.MkdirTemp(dir, ".rebucket-disk-probe-")
	if err != nil {
		return r, fmt.Errorf("measure disk in %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	write := func(name string, size int) (time.Duration, error) {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i * 7919 >> 3) // not all zeros, in case of compressing filesystems
		}
		start := time.Now()
		f, err := os.Create(filepath.Join(tmp, name))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	const big = 16 << 20
	if r.Elapsed, err = write("big", big); err != nil {
		return r, fmt.Errorf("measure disk in %s: %w", dir, err)
	}
	r.Bytes = big
	if r.FileFsync, err = write("small", 4<<10); err != nil {
		return r, fmt.Errorf("measure disk in %s: %w", dir, err)
	}
	r.ElapsedSeconds, r.FileFsyncSeconds = r.Elapsed.Seconds(), r.FileFsync.Seconds()
	return r, nil
}

// RewriteEstimate is an estimated wall time for a rewrite plan.
type RewriteEstimate struct {
	Rate ScanRate      `json:"measured_scan"`
	Disk DiskRate      `json:"measured_disk"`
	Time time.Duration `json:"-"`
	// CPUTime, WriteTime and FileTime are the parts of Time: the copy
	// work over the parallelism, writing the output (and spill) to disk,
	// and one fsync per output file.
	CPUTime   time.Duration `json:"-"`
	WriteTime time.Duration `json:"-"`
	FileTime  time.Duration `json:"-"`
	// The same in seconds, for --json.
	Seconds      float64 `json:"estimated_seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	WriteSeconds float64 `json:"write_seconds"`
	FileSeconds  float64 `json:"files_seconds"`
	Files        int     `json:"output_files_estimate"`
	// HighSeconds is the upper end of the estimate's range (RoughFactor
	// times Seconds): cores shared with other work do not scale.
	HighSeconds float64 `json:"estimated_high_seconds"`
	// Basis says where the figure comes from, in words.
	Basis string `json:"basis"`
}

// RoughFactor bounds how much longer than estimated a rewrite has taken:
// the estimate assumes free cores that scale with the parallelism, and
// measured runs on a loaded 2-core machine took up to about 4x as long.
const RoughFactor = 4

// EstimateRewrite estimates the wall time of p from measured rates: the
// copy work (every source byte read, once per pass, at the measured copy
// rate, and each spilled byte twice) divided over the plan's parallelism,
// plus writing the output and spill at the measured disk rate, plus one
// fsync per output file (files are cut by size and at the cut widths).
func EstimateRewrite(p RewritePlan, rate ScanRate, disk DiskRate) RewriteEstimate {
	e := RewriteEstimate{Rate: rate, Disk: disk}
	bps := rate.BytesPerSecond()
	if bps == 0 {
		e.Basis = "no data was read, so there is no measured rate"
		return e
	}
	par := float64(max(1, p.Parallelism))
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	// The copy work: the scan (with the fingerprints of the self-check),
	// spilled bytes written and read back, and the self-check's read of
	// the output, about as many bytes as the source.
	e.CPUTime = sec(float64(2*p.ReadBytes+2*p.SpillBytes) / bps / par)
	if disk.Elapsed > 0 && disk.Bytes > 0 {
		e.WriteTime = sec(float64(p.WriteBytes+p.SpillBytes) / (float64(disk.Bytes) / disk.Elapsed.Seconds()))
	}
	// Files are cut by size, where owners' ranges end, and where the
	// workers of the widest cut width begin.
	widths := p.CutWidths
	if widths == nil {
		widths = DefaultCutWidths(int(p.To.Buckets), 0)
	}
	widest := 1
	for _, w := range widths {
		widest = max(widest, w)
	}
	e.Files = int((p.WriteBytes+(128<<20)-1)/(128<<20)) + p.Parallelism + min(int(p.To.Buckets), widest)
	e.FileTime = time.Duration(float64(e.Files) * float64(disk.FileFsync) / par)
	e.Time = e.CPUTime + e.WriteTime + e.FileTime
	e.Seconds, e.CPUSeconds, e.WriteSeconds, e.FileSeconds = e.Time.Seconds(), e.CPUTime.Seconds(), e.WriteTime.Seconds(), e.FileTime.Seconds()
	e.HighSeconds = RoughFactor * e.Seconds
	e.Basis = fmt.Sprintf("measured on this machine just now: one goroutine copied part of this snapshot (checksum, decode, re-encode with snappy), and a 16 MiB file and a small one were written and fsynced; the estimate is copy work (the scan and the self-check's read-back) over the parallelism, plus output and spill at the disk rate, plus one fsync per output file. It is rough: it assumes the cores are free and scale; on a busy or small machine a run can take up to %dx as long", RoughFactor)
	return e
}
