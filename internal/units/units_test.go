package units

import (
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"0", 0, false},
		{"4096", 4096, false},
		{"64MiB", 64 << 20, false},
		{"64 mib", 64 << 20, false},
		{"4GiB", 4 << 30, false},
		{"1.5GiB", 3 << 29, false},
		{"512KiB", 512 << 10, false},
		{"2TiB", 2 << 40, false},
		{"1GB", 1e9, false},
		{"10MB", 10e6, false},
		{"1K", 1024, false},
		{"8g", 8 << 30, false},
		{"100B", 100, false},
		{"", 0, true},
		{"lots", 0, true},
		{"-1MiB", 0, true},
		{"NaN", 0, true},
		{"1e30GiB", 0, true},
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestPrinting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Bytes(0), "0 B"},
		{Bytes(1023), "1023 B"},
		{Bytes(1536), "1.5 KiB"},
		{Bytes(731 << 20), "731.0 MiB"},
		{Bytes(3 << 30), "3.0 GiB"},
		{Rate(100<<20, 2*time.Second), "50.0 MiB/s"},
		{Rate(1, 0), "n/a"},
		{Count(0), "0"},
		{Count(999), "999"},
		{Count(1000), "1,000"},
		{Count(10000000), "10,000,000"},
		{Duration(1500 * time.Millisecond), "1.5s"},
		{Duration(125 * time.Second), "2m5s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
