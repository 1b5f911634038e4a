package rocksdbsst

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error about a damaged or malformed table.
var ErrCorrupt = errors.New("rocksdbsst: corrupt table")

// ErrUnsupported is wrapped by errors about valid RocksDB features this reader
// does not decode; the message names the feature.
var ErrUnsupported = errors.New("rocksdbsst: unsupported table feature")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}
