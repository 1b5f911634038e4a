package rocksdbsst

import (
	"fmt"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// ErrCorrupt is wrapped by every error about a damaged or malformed table;
// it wraps snapshotfmt.ErrCorrupt, as the project's other decoders do.
var ErrCorrupt = fmt.Errorf("rocksdbsst: corrupt table: %w", snapshotfmt.ErrCorrupt)

// ErrUnsupported is wrapped by errors about valid RocksDB features this reader
// does not decode; the message names the feature. It wraps
// snapshotfmt.ErrUnsupported.
var ErrUnsupported = fmt.Errorf("rocksdbsst: unsupported table feature: %w", snapshotfmt.ErrUnsupported)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}
