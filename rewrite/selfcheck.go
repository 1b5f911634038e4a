package rewrite

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
	"github.com/rebucket/rebucket/verify"
)

// Verification is what a rewrite proved about its output before it
// published it (DESIGN.md section 6).
type Verification struct {
	// Checked is "fingerprints" (the output read back against the
	// fingerprints of the source taken during the scan), "equality" (they
	// differed, and the exact comparison that names keys ran too) or
	// "skipped" (Options.NoVerify).
	Checked  string         `json:"checked"`
	Verified bool           `json:"verified"`
	Detail   string         `json:"detail"`
	Errors   int            `json:"errors"`
	ByKind   map[string]int `json:"by_kind,omitempty"`
	Seconds  float64        `json:"elapsed_seconds"`
}

// selfCheck proves the sealed, unpublished output in dir: the fingerprints
// of the source's entries, taken during the scan in the target layout, must
// equal those of the output read back (every file's checksum checked),
// every entry must sit in the bucket its key hashes to, the bucket stats
// must agree and per-worker state must be byte-identical. Only when that
// fails is the source read again, by verify.Equal, to name the differing
// keys to opts.Findings. A Verification that is not Verified means the
// output must not be published.
func selfCheck(ctx context.Context, opts Options, dir string, src *reader.Snapshot, sum *Summary, want verify.FingerprintSet) (Verification, error) {
	start := time.Now()
	v := Verification{Checked: "fingerprints", ByKind: map[string]int{}}
	out, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return v, fmt.Errorf("read back the output: %w", err)
	}
	// Equality with the source is not enough: the output must also be
	// valid (a sub-key on a state that has none is invisible to the
	// fingerprints, which ignore it for such states, and load rejects it).
	var noSub [1 << 16]bool
	for _, st := range out.Manifest().States {
		noSub[st.ID] = st.Kind != snapshotfmt.KindMap
	}
	var misplaced, malformed atomic.Int64
	got, err := verify.Fingerprints(ctx, out, sum.To, verify.FingerprintOptions{
		Parallelism: opts.Parallelism, Progress: opts.VerifyProgress,
		OnEntry: func(key, _ []byte, bucket, stored uint32) {
			if bucket != stored {
				misplaced.Add(1)
			}
			if dk, err := snapshotfmt.DecodeKey(key); err != nil || (noSub[dk.State] && len(dk.SubKey) > 0) {
				malformed.Add(1)
			}
		},
	})
	if err != nil {
		return v, fmt.Errorf("read back the output: %w", err)
	}
	m := out.Manifest()
	differ := want.Differ(got)
	stats := 0
	for b, fp := range got.Buckets {
		if fp.Count != m.BucketEntries[b] {
			stats++
		}
	}
	workers, invalid, err := sameWorkerState(src, out, sum.Renamed)
	if err != nil {
		return v, err
	}
	note := func(kind string, n int) {
		if n > 0 {
			v.ByKind[kind] += n
			v.Errors += n
		}
	}
	note("fingerprint", len(differ))
	note("misplaced", int(misplaced.Load()))
	note("bucket_stats", stats)
	note("malformed", int(malformed.Load()))
	note("worker_state", workers)
	note("worker_state_invalid", invalid)
	v.Seconds = time.Since(start).Seconds()
	if v.Errors == 0 {
		v.Verified = true
		v.Detail = fmt.Sprintf("verified in %s before publishing: the target's %s entries, read back with every file's checksum checked, match the fingerprints of the source's entries taken during the scan in all %d buckets; every entry is in the bucket its key hashes to and decodes as its state's kind, the bucket stats agree, per-worker state is byte-identical (%d states) and decodes to the manifest's item counts",
			units.Duration(time.Since(start)), units.Count(m.TotalEntries()), len(got.Buckets), len(m.WorkerStates))
		return v, nil
	}
	v.Detail = fmt.Sprintf("verification FAILED, so the target was not published: %d buckets' fingerprints differ, %d misplaced entries, %d malformed entries, %d buckets with wrong stats, %d per-worker state files differ, %d do not decode",
		len(differ), misplaced.Load(), malformed.Load(), stats, workers, invalid)
	if len(sum.Dropped) == 0 && len(sum.Renamed) == 0 {
		sink := opts.Findings
		if sink == nil {
			sink = func(verify.Finding) {}
		}
		es, err := verify.Equal(ctx, dir, opts.Source, verify.EqualOptions{Parallelism: opts.Parallelism}, sink)
		if err != nil {
			return v, err
		}
		v.Checked = "equality"
		v.Detail += fmt.Sprintf("; the exact comparison with the source found %d differences", es.Errors)
	}
	v.Seconds = time.Since(start).Seconds()
	return v, nil
}

// sameWorkerState counts the per-worker state files of the output whose
// bytes differ from the source's (under the renames "OLD=NEW"), and those
// that do not decode to the manifest's item count; reading them checks
// their checksums.
func sameWorkerState(src, out *reader.Snapshot, renamed []string) (bad, invalid int, err error) {
	oldName := map[string]string{}
	for _, r := range renamed {
		old, nw, _ := strings.Cut(r, "=")
		oldName[nw] = old
	}
	byName := map[string]int{}
	for i, ws := range src.Manifest().WorkerStates {
		byName[ws.QualifiedName()] = i
	}
	for _, ws := range out.Manifest().WorkerStates {
		q := ws.QualifiedName()
		if old, ok := oldName[q]; ok {
			q = old
		}
		i, ok := byName[q]
		if !ok {
			bad++
			continue
		}
		sws := src.Manifest().WorkerStates[i]
		if sws.Rule != ws.Rule || len(sws.Files) != len(ws.Files) {
			bad++
			continue
		}
		for j, wf := range ws.Files {
			a, err := out.ReadWorkerFileRaw(wf)
			if err != nil {
				return 0, 0, err
			}
			if checkWorkerItems(a, ws, wf) != nil {
				invalid++
			}
			b, err := src.ReadWorkerFileRaw(sws.Files[j])
			if err != nil {
				return 0, 0, err
			}
			if !bytes.Equal(a, b) {
				bad++
			}
		}
	}
	return bad, invalid, nil
}
