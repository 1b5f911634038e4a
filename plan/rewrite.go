package plan

import (
	"fmt"
	"runtime"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Strategy is how a rewrite moves entries into the new layout.
type Strategy string

const (
	// StrategySplit streams each old bucket once into one writer per new
	// bucket it feeds (same mapping, M a multiple of N).
	StrategySplit Strategy = "split"
	// StrategyMerge merges, streaming, the few old buckets that feed each
	// new bucket (range to range; mod to mod with N a multiple of M).
	StrategyMerge Strategy = "merge"
	// StrategyShuffle routes every entry to the owner of its new bucket,
	// which sorts with bounded memory, spilling sorted runs to disk.
	StrategyShuffle Strategy = "shuffle"
)

// Sizing constants of the pipeline, shared by the plan and the rewrite so
// that what the plan promises is what the rewrite does.
const (
	// MaxFanOut bounds the writers per task of earlier plans; a split now
	// takes one pass (its new buckets wait in the rewrite's collector).
	MaxFanOut = 256
	// MaxFanIn bounds the old buckets one merge task reads at once; a wider
	// merge is done as a shuffle.
	MaxFanIn = 64
	// MaxSplitPasses is kept for callers of earlier plans; a split takes
	// one pass.
	MaxSplitPasses = 3
	// WriterMemory is the resident cost of one open bucket writer (its 1 MiB
	// write buffer, the table's block and index buffers).
	WriterMemory = 2 << 20
	// ReaderMemory is the resident cost of one open source file iterator.
	ReaderMemory = 256 << 10
	// FixedOverhead is the memory the process uses beyond the budget: the Go
	// runtime, the manifest, batches in flight, garbage awaiting collection.
	// Measured peak RSS minus budget stayed below it (see the rewrite
	// package's tests and the closing note of issue 3).
	FixedOverhead = 96 << 20
	// minSorterMemory keeps each owner's sorter useful on tiny budgets.
	minSorterMemory = 1 << 20
)

// Resources are what the rewrite may use.
type Resources struct {
	// Memory is the budget in bytes (entries held in memory, open writers).
	Memory int64
	// Parallelism is the number of concurrent tasks (default GOMAXPROCS).
	Parallelism int
}

// RewritePlan is what a rewrite to another partitioning will do and cost.
type RewritePlan struct {
	From     snapshotfmt.Partitioning `json:"from"`
	To       snapshotfmt.Partitioning `json:"to"`
	Strategy Strategy                 `json:"strategy"`
	// Reason says in one sentence why this strategy.
	Reason string `json:"reason"`

	Entries      uint64 `json:"entries"`
	LogicalBytes uint64 `json:"logical_bytes"`
	// SourceBytes is the size of the source's data files on disk.
	SourceBytes int64 `json:"source_bytes"`

	// FanOut is the most new buckets one old bucket feeds; FanIn the most
	// old buckets one new bucket draws from.
	FanOut int `json:"fan_out"`
	FanIn  int `json:"fan_in"`
	// WritersPerTask is the most writers one task holds open (split, and
	// merge of range into more buckets); Passes is how many times a split
	// reads each old bucket to stay within it.
	WritersPerTask int `json:"writers_per_task"`
	Passes         int `json:"passes"`
	// Groups is the number of independent groups of a shuffle: bucketGCD(N, M)
	// under mod to mod (old bucket b feeds only new buckets j = b mod g),
	// else 1. Groups run one after another, each with all the parallelism.
	Groups      int `json:"groups"`
	Parallelism int `json:"parallelism"`

	// ReadBytes is the source data read (more than SourceBytes when a split
	// takes several passes or merge tasks share a boundary bucket).
	ReadBytes int64 `json:"read_bytes"`
	// WriteBytes is the estimated size of the target's data files.
	WriteBytes int64 `json:"write_bytes"`
	// SpillBytes is the estimated total written to (and read back from) the
	// temporary directory; TmpDiskBytes the most held there at once (the
	// largest group, whose spill files are removed before the next).
	SpillBytes   int64 `json:"spill_bytes"`
	TmpDiskBytes int64 `json:"tmp_disk_bytes"`
	// TargetDiskBytes is the free space the target's filesystem needs.
	TargetDiskBytes int64 `json:"target_disk_bytes"`

	// Memory is the budget; SorterMemory the part of it the shuffle's
	// owners sort in (split evenly between them); PeakMemory the expected
	// peak resident memory: what the budget will really hold plus
	// FixedOverhead.
	Memory       int64 `json:"memory"`
	SorterMemory int64 `json:"sorter_memory"`
	PeakMemory   int64 `json:"peak_memory"`

	// CutWidths are the widths whose workers' ranges the files are cut
	// at (set by the rewrite; see DefaultCutWidths).
	CutWidths []int `json:"cut_widths,omitempty"`

	Warnings []string `json:"warnings"`
}

// ForRewrite plans a rewrite of the snapshot m into target with a memory
// budget, at the default parallelism (GOMAXPROCS).
func ForRewrite(m *snapshotfmt.Manifest, target snapshotfmt.Partitioning, memory int64) RewritePlan {
	return ForRewriteWith(m, target, Resources{Memory: memory})
}

// ForRewriteWith plans a rewrite with explicit resources.
func ForRewriteWith(m *snapshotfmt.Manifest, target snapshotfmt.Partitioning, r Resources) RewritePlan {
	if r.Parallelism < 1 {
		r.Parallelism = runtime.GOMAXPROCS(0)
	}
	if r.Memory < 1 {
		r.Memory = 1
	}
	from := m.Partitioning
	n, mm := int(from.Buckets), int(target.Buckets)
	p := RewritePlan{
		From: from, To: target, Entries: m.TotalEntries(), LogicalBytes: m.TotalBytes(),
		SourceBytes: m.DataBytes(), Groups: 1, Parallelism: r.Parallelism, Memory: r.Memory, Passes: 1,
		Warnings: []string{},
	}
	p.FanOut, p.FanIn = fanOutIn(from, target)
	writerCap := FanOutLimit(r.Memory, r.Parallelism)
	sameMapping := from.Mapping == target.Mapping
	switch {
	case sameMapping && mm%n == 0:
		// One pass: the new buckets of an old bucket wait in the
		// collector's budget (spilled past it) for the owner of their
		// range, never in a writer each.
		k := mm / n
		p.Passes = 1
		p.WritersPerTask = 1
		p.Strategy = StrategySplit
		if k == 1 {
			p.Reason = "same bucket count and mapping: each bucket is copied as it is"
		} else {
			p.Reason = fmt.Sprintf("same mapping and %d is a multiple of %d: each old bucket feeds exactly %d new ones", mm, n, k)
		}
	case sameMapping && from.Mapping == snapshotfmt.MappingRange && p.FanIn <= MaxFanIn:
		p.Strategy = StrategyMerge
		p.Reason = fmt.Sprintf("range to range: each new bucket overlaps at most %d old buckets' hash ranges", p.FanIn)
		if mm > n {
			// A task writes a chunk of new buckets, one writer each. Chunks
			// of M/gcd(N, M) new buckets start and end on old bucket
			// boundaries, so no old bucket is read twice; otherwise about
			// four old buckets' worth keeps rereads of shared boundary
			// buckets near a quarter.
			aligned := mm / bucketGCD(n, mm)
			if aligned <= writerCap && (aligned-1)*n/mm+1 <= MaxFanIn {
				p.WritersPerTask = aligned
			} else {
				p.WritersPerTask = max(1, min(writerCap, 4*mm/n, (MaxFanIn-1)*mm/n))
			}
		} else {
			p.WritersPerTask = 1
		}
	case sameMapping && n%mm == 0 && p.FanIn <= MaxFanIn:
		p.Strategy = StrategyMerge
		p.WritersPerTask = 1
		p.Reason = fmt.Sprintf("mod to mod and %d is a multiple of %d: each new bucket folds %d old ones", n, mm, n/mm)
	default:
		switch {
		case !sameMapping:
			p.Reason = fmt.Sprintf("the mapping changes (%s to %s): every new bucket draws from many old ones", from.Mapping, target.Mapping)
		case p.FanIn > MaxFanIn:
			p.Reason = fmt.Sprintf("each new bucket draws from up to %d old buckets, above the merge limit of %d", p.FanIn, MaxFanIn)
		default:
			p.Reason = fmt.Sprintf("mod %d to mod %d: every new bucket draws from several old ones", n, mm)
		}
	}
	if p.Strategy == "" {
		p.Strategy = StrategyShuffle
		p.Passes = 1
		p.WritersPerTask = 1
		if from.Mapping == snapshotfmt.MappingMod && target.Mapping == snapshotfmt.MappingMod {
			p.Groups = bucketGCD(n, mm)
			// Groups run one after another, and each group's buckets wait
			// for those of the groups after it before they can be written
			// in bucket order. When the whole does not fit the sorters,
			// one group spills in the sort anyway and the waiting output
			// spills again: sorting everything at once spills each entry
			// once (measured at 10M entries, --memory 36MiB: 664 MiB
			// spilled instead of 1355, same CPU).
			need := int64(m.TotalBytes()) + 16*int64(m.TotalEntries())
			// (Grouped, half the sorter budget holds the waiting output.)
			if g := p.Groups; g > 1 && need > SorterMemory(r.Memory, r.Parallelism)/2 {
				p.Groups = 1
				p.Reason += fmt.Sprintf("; it falls apart into gcd(%d, %d) = %d independent groups, but they do not fit the memory budget together, so they are sorted as one (each entry spills once)", n, mm, g)
			} else if g > 1 {
				p.Reason += fmt.Sprintf("; it falls apart into gcd(%d, %d) = %d independent groups", n, mm, p.Groups)
			}
		}
	}

	// I/O and disk.
	p.ReadBytes = p.SourceBytes * int64(p.Passes)
	if p.Strategy == StrategyMerge && from.Mapping == snapshotfmt.MappingRange {
		// Tasks that share a boundary old bucket both read it (none do
		// when chunks end on old bucket boundaries).
		tasks := (mm + p.WritersPerTask - 1) / p.WritersPerTask
		if tasks > 1 && (p.WritersPerTask*n)%mm != 0 {
			p.ReadBytes += p.SourceBytes * int64(min(tasks-1, n)) / int64(n)
		}
	}
	// Tables compress about as well as the source did; each new file adds
	// its index, footer and properties.
	p.WriteBytes = p.SourceBytes + p.SourceBytes/20 + int64(min(mm, 2*MaxDefaultCutWidth+r.Parallelism))*8<<10
	p.TargetDiskBytes = p.WriteBytes
	p.SorterMemory = SorterMemory(r.Memory, r.Parallelism)
	openWriters := int64(r.Parallelism) * int64(max(p.WritersPerTask, 1))
	openReaders := int64(r.Parallelism) * int64(max(p.FanIn, 1))
	held := openWriters*WriterMemory + openReaders*ReaderMemory
	if p.Strategy == StrategyShuffle {
		// Spill format: the entry plus two length prefixes, uncompressed.
		groupBytes := make([]uint64, p.Groups)
		groupEntries := make([]uint64, p.Groups)
		for b := range m.BucketBytes {
			groupBytes[b%p.Groups] += m.BucketBytes[b]
			groupEntries[b%p.Groups] += m.BucketEntries[b]
		}
		var inMem int64
		for gi := range groupBytes {
			need := int64(groupBytes[gi] + 16*groupEntries[gi])
			// Each owner sorts its share; it spills only when that share
			// exceeds the owner's part of the sorter budget.
			if need > p.SorterMemory {
				p.SpillBytes += need
				p.TmpDiskBytes = max(p.TmpDiskBytes, need)
			}
			inMem = max(inMem, min(need, p.SorterMemory))
		}
		if p.SpillBytes > 0 {
			p.ReadBytes += p.SpillBytes
		}
		held = int64(r.Parallelism)*WriterMemory + inMem
	}
	if need := int64(m.TotalBytes()) + 8*int64(m.TotalEntries()); p.Strategy == StrategySplit && from.Mapping == snapshotfmt.MappingMod && mm > n {
		// Owners of mod split output hold whole rounds of N new buckets;
		// when they hold several, the later rounds wait (spilled past the
		// budget) for the first: see rewrite.ownersFor.
		k := int64(mm / n)
		maxOwners := max(int64(r.Parallelism), r.Memory/2/WriterMemory)
		if per := (k + maxOwners - 1) / maxOwners; 2*need > r.Memory && per > 1 {
			p.SpillBytes = need - need/per
			p.TmpDiskBytes = p.SpillBytes
			p.ReadBytes += p.SpillBytes
		}
	} else if p.Strategy == StrategyShuffle && p.Groups > 1 {
		// The groups' buckets wait for the buckets between them; past half
		// the sorter budget they wait on disk.
		if wait := need - need/int64(p.Groups) - p.SorterMemory/2; wait > 0 {
			p.SpillBytes += wait
			p.TmpDiskBytes += wait
			p.ReadBytes += wait
		}
	}
	p.PeakMemory = held + FixedOverhead
	if held > r.Memory {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the open writers and readers alone need about %d MiB, above the memory budget of %d MiB", held>>20, r.Memory>>20))
	}
	if mm > snapshotfmt.WarnBuckets {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d buckets is above %d: every tool and the job pay a per-bucket bookkeeping cost", mm, snapshotfmt.WarnBuckets))
	}
	return p
}

// FanOutLimit is how many writers one task may keep open with this budget
// and parallelism: at most MaxFanOut, and at least 1.
func FanOutLimit(memory int64, parallelism int) int {
	per := memory / int64(max(parallelism, 1)) / 2 / WriterMemory
	return int(max(1, min(int64(MaxFanOut), per)))
}

// SorterMemory is the part of the budget the shuffle's sorters share: the
// budget less the owners' writers and the batches in flight, never below a
// small floor per owner.
func SorterMemory(memory int64, parallelism int) int64 {
	p := int64(max(parallelism, 1))
	s := memory - p*WriterMemory - p*4*BatchBytes
	return max(s, p*minSorterMemory)
}

// BatchBytes is the size a scanner fills a batch to before handing it to an
// owner.
const BatchBytes = 256 << 10

// fanOutIn computes the most new buckets one old bucket feeds and the most
// old buckets one new bucket draws from.
func fanOutIn(from, to snapshotfmt.Partitioning) (out, in int) {
	n, m := int(from.Buckets), int(to.Buckets)
	if from.Mapping != to.Mapping {
		return m, n
	}
	if from.Mapping == snapshotfmt.MappingRange {
		// A range of width 1/m overlaps at most ceil(n/m)+1 ranges of width 1/n.
		return min(m, (m+n-1)/n+1), min(n, (n+m-1)/m+1)
	}
	g := bucketGCD(n, m)
	return m / g, n / g
}

func bucketGCD(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
