package plan

import "golang.org/x/sys/unix"

// DefaultMemory is the memory budget of a rewrite or import when none is
// given: a quarter of physical memory (256 MiB if it cannot be read).
func DefaultMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 256 << 20
	}
	return int64(si.Totalram) * int64(si.Unit) / 4
}
