package plan

import (
	"fmt"

	"github.com/rebucket/rebucket/internal/units"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Bounds of a writing command's --file-size.
const (
	// MinFileSize is the smallest target data file size the commands
	// accept, one table block: below it every entry or two becomes a file
	// of its own (`rewrite --file-size 1` wrote a million files, took 3 GB
	// and failed only at commit, 341 s later, on a manifest over its
	// bound). MaxDataFiles is the bound that matters for large data.
	MinFileSize = 4 << 10
	// MaxDataFiles bounds the data files one snapshot is planned to hold:
	// with about 300 bytes of manifest per file, this keeps the manifest
	// far inside snapshotfmt.MaxManifestSize.
	MaxDataFiles = 100_000
)

// CheckFileSize refuses a target file size below MinFileSize, or one that
// would cut dataBytes into more than MaxDataFiles files, saying which size
// would do. dataBytes is what the output is expected to hold on disk (for
// a rewrite, the source's data files); 0 checks the floor only.
func CheckFileSize(fileSize, dataBytes int64) error {
	if fileSize < MinFileSize {
		return fmt.Errorf("%w: --file-size %s is below the %s floor: a file below one table block holds an entry or two; use at least %s (default 128MiB)",
			snapshotfmt.ErrInvalidArgument, units.Bytes(fileSize), units.Bytes(MinFileSize), units.Bytes(MinFileSize))
	}
	if files := dataBytes / fileSize; files > MaxDataFiles {
		need := (dataBytes + MaxDataFiles - 1) / MaxDataFiles
		return fmt.Errorf("%w: --file-size %s would cut %s of data into about %d files, over the %d one snapshot may hold; use at least --file-size %s",
			snapshotfmt.ErrInvalidArgument, units.Bytes(fileSize), units.Bytes(dataBytes), files, MaxDataFiles, units.Bytes(max(need, MinFileSize)))
	}
	return nil
}
