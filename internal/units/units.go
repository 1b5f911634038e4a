// Package units parses and prints byte sizes and durations the way every
// command shows them: 64MiB, 4GiB, 1.5 GB/s.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var suffixes = []struct {
	s string
	m float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseBytes accepts a plain number of bytes or a number with a unit:
// KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), K, M,
// G, T (taken as binary). Case and a space before the unit do not matter.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t = strings.TrimSpace(strings.TrimSuffix(t, suf.s))
			mult = suf.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 512MiB or 4GiB", s)
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(b), nil
}

// Bytes prints a byte count in binary units: 1.5 GiB.
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v /= 1024
		if math.Abs(v) < 1024 {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	return fmt.Sprintf("%.1f EiB", v/1024)
}

// Rate prints bytes per second over d: 412.3 MiB/s.
func Rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	return Bytes(int64(float64(n)/d.Seconds())) + "/s"
}

// Duration prints a duration rounded for people: 1.234s, 2m3s.
func Duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond * 10).String()
	default:
		return d.Round(time.Second).String()
	}
}

// Count prints an integer with thousands separators: 10,000,000.
func Count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
