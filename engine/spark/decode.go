package spark

import (
	"fmt"
	"strings"

	"github.com/rebucket/rebucket/internal/unsaferow"
)

// decodeKey renders a key row as (col=value, ...).
func decodeKey(s *Store, k string) (string, error) {
	vals, err := unsaferow.Decode(s.KeySchema, []byte(k))
	if err != nil {
		return "", err
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		if b, ok := v.(string); ok {
			v = fmt.Sprintf("%q", b)
		}
		parts[i] = fmt.Sprintf("%s=%v", s.KeySchema.Fields[i].Name, v)
	}
	return "(" + strings.Join(parts, ", ") + ")", nil
}

func itoa(i int) string { return fmt.Sprint(i) }
