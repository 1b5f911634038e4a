package plan

import "encoding/json"

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
