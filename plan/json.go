package plan

import (
	"encoding/json"
	"fmt"
	"strings"
)

// orNull is nil for a negative value: a bucket bound that does not exist
// (an idle worker's) is null in JSON, not -1.
func orNull(v int) *int {
	if v < 0 {
		return nil
	}
	return &v
}

// MarshalJSON writes an idle worker's bucket bounds as null.
func (l WorkerLoad) MarshalJSON() ([]byte, error) {
	type plain WorkerLoad
	return json.Marshal(struct {
		plain
		BucketLo *int `json:"bucket_lo"`
		BucketHi *int `json:"bucket_hi"`
	}{plain(l), orNull(l.BucketLo), orNull(l.BucketHi)})
}

// MarshalJSON writes a row of idle workers' bucket bounds as null.
func (r RangeRow) MarshalJSON() ([]byte, error) {
	type plain RangeRow
	return json.Marshal(struct {
		plain
		BucketLo *int `json:"bucket_lo"`
		BucketHi *int `json:"bucket_hi"`
	}{plain(r), orNull(r.BucketLo), orNull(r.BucketHi)})
}

// CompactInts lists ints for people, runs of three or more as ranges
// (0-3, 5, 7-9; "none" for none), never as a Go slice.
func CompactInts(v []int) string {
	var parts []string
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d-%d", v[i], v[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, fmt.Sprint(v[k]))
			}
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
