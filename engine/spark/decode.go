package spark

import (
	"fmt"
	"strings"
	"unsafe"

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

// bytesOf views a string's bytes without copying; callers only read them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func fmtAny(v any) string { return fmt.Sprint(v) }
