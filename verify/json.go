package verify

import "encoding/json"

// MarshalJSON writes the bucket of a finding that is not about one bucket
// as null, not -1.
func (f Finding) MarshalJSON() ([]byte, error) {
	type plain Finding
	var b *int64
	if f.Bucket >= 0 {
		b = &f.Bucket
	}
	return json.Marshal(struct {
		plain
		Bucket *int64 `json:"bucket"`
	}{plain(f), b})
}
