package dataset

// Test hooks for the external tests of this package.

// SetTestOnOpen installs f to learn how many export files are open after
// each one is created; nil removes it.
func SetTestOnOpen(f func(open int)) { testOnOpen = f }

// SetMaxStateWriters sets the state partitions written per pass and returns
// the previous value.
func SetMaxStateWriters(n int) int {
	old := maxStateWriters
	maxStateWriters = n
	return old
}
