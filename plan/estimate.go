package plan

import (
	"context"
	"time"

	"github.com/rebucket/rebucket/reader"
)

// ScanRate is a throughput measured on this machine by reading part of a
// snapshot: Bytes of data files (on-disk size, checksummed, decoded) in
// Elapsed, by one goroutine.
type ScanRate struct {
	Bytes   int64         `json:"bytes"`
	Entries uint64        `json:"entries"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Files   int           `json:"files"`
}

// BytesPerSecond is the measured rate (0 when nothing was read).
func (r ScanRate) BytesPerSecond() float64 {
	if r.Elapsed <= 0 || r.Bytes == 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds()
}

// MeasureScanRate reads whole data files of the snapshot, first to last,
// until about limit bytes or a second have passed, and times it. It is the
// figure the rewrite estimate is built on: a rewrite's work is dominated by
// reading, rehashing and writing the same bytes.
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
		for fi.Next() {
			r.Entries++
		}
		err = fi.Err()
		fi.Close()
		if err != nil {
			return r, err
		}
		r.Bytes += df.Size
		r.Files++
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// RewriteEstimate is an estimated wall time for a rewrite plan.
type RewriteEstimate struct {
	Rate ScanRate      `json:"measured_scan"`
	Time time.Duration `json:"estimated_ns"`
	// Basis says where the figure comes from, in words.
	Basis string `json:"basis"`
}

// EstimateRewrite estimates the wall time of p from a measured scan rate:
// every byte read, written, and spilled (written and read back) is assumed
// to cost what a byte of scanning cost, spread over the plan's parallelism
// (at most the cores the scan did not use, so this leans slow).
func EstimateRewrite(p RewritePlan, rate ScanRate) RewriteEstimate {
	e := RewriteEstimate{Rate: rate}
	bps := rate.BytesPerSecond()
	if bps == 0 {
		e.Basis = "no data was read, so there is no measured rate"
		return e
	}
	work := float64(p.ReadBytes + p.WriteBytes + 2*p.SpillBytes)
	par := float64(max(1, p.Parallelism))
	e.Time = time.Duration(work / bps / par * float64(time.Second))
	e.Basis = "measured on this machine: one goroutine scanned (checksummed and decoded) part of this snapshot; the estimate charges that rate for every byte read, written and spilled (twice), divided over the parallelism"
	return e
}
