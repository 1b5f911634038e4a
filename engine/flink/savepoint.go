package flink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// MetadataFile is the name of a savepoint's metadata file.
const MetadataFile = "_metadata"

// Savepoint is an opened canonical savepoint: its directory and decoded
// _metadata. Opening reads only _metadata; state files are read on demand.
type Savepoint struct {
	Dir  string
	Meta *Metadata
	// MetaBytes is the _metadata file as read.
	MetaBytes []byte
}

// IsSavepoint tells whether path is a Flink savepoint directory (holding
// _metadata) or a _metadata file, by its magic number.
func IsSavepoint(path string) bool {
	p := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p = filepath.Join(path, MetadataFile)
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return bytes.Equal(b[:], []byte{0x49, 0x60, 0x67, 0x2d})
}

// Open opens a savepoint given its directory or its _metadata file.
func Open(path string) (*Savepoint, error) {
	dir, meta := path, filepath.Join(path, MetadataFile)
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist", snapshotfmt.ErrNotFound, path)
		}
		return nil, fmt.Errorf("open savepoint: %w", err)
	}
	if !fi.IsDir() {
		dir, meta = filepath.Dir(path), path
	}
	f, err := os.Open(meta)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no %s file (a Flink savepoint directory holds one)", snapshotfmt.ErrNotFound, dir, MetadataFile)
		}
		return nil, fmt.Errorf("open savepoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open savepoint: %w", err)
	}
	if st.Size() > MaxMetadataSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, above the %d this build reads", snapshotfmt.ErrTooLarge, meta, st.Size(), int64(MaxMetadataSize))
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", meta, err)
	}
	md, err := DecodeMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", meta, err)
	}
	return &Savepoint{Dir: dir, Meta: md, MetaBytes: b}, nil
}

// MaxParallelism is the savepoint's max parallelism: that of its keyed
// operators (all operators carry one; Flink checks each against the job).
func (sp *Savepoint) MaxParallelism() int {
	m := 0
	for _, op := range sp.Meta.Operators {
		if op.HasKeyedState() {
			return int(op.MaxParallelism)
		}
		if m == 0 {
			m = int(op.MaxParallelism)
		}
	}
	return m
}

// HasKeyedState tells whether any subtask of the operator holds keyed state.
func (o *OperatorState) HasKeyedState() bool {
	for _, st := range o.Subtasks {
		if st.ManagedKeyed != nil || st.RawKeyed != nil {
			return true
		}
	}
	return false
}

// handleFile resolves a file handle to a local path.
func (sp *Savepoint) handleFile(h *StreamHandle) (string, error) {
	switch h.Type {
	case handleRelativeFile:
		rel := filepath.FromSlash(h.Path)
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%w: relative state file path %q leaves the savepoint directory", snapshotfmt.ErrCorrupt, h.Path)
		}
		return filepath.Join(sp.Dir, rel), nil
	case handleFile:
		p := h.Path
		switch {
		case strings.HasPrefix(p, "file://"):
			p = strings.TrimPrefix(p, "file://")
		case strings.HasPrefix(p, "file:"):
			p = strings.TrimPrefix(p, "file:")
		case strings.Contains(p, "://"):
			return "", fmt.Errorf("%w: state file %s is on a remote file system; copy the savepoint to a local directory first", snapshotfmt.ErrUnsupported, p)
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: stream handle type %d is not a file", snapshotfmt.ErrUnsupported, h.Type)
}

// openHandle opens the stream of a handle for random access.
func (sp *Savepoint) openHandle(h *StreamHandle) (io.ReaderAt, int64, io.Closer, string, error) {
	if h.Type == handleByteStream {
		return bytes.NewReader(h.Data), int64(len(h.Data)), io.NopCloser(nil), "inline state " + JavaString(h.Name), nil
	}
	p, err := sp.handleFile(h)
	if err != nil {
		return nil, 0, nil, "", err
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, nil, p, fmt.Errorf("%w: state file %s named in _metadata is missing", snapshotfmt.ErrCorrupt, p)
		}
		return nil, 0, nil, p, fmt.Errorf("open state file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, p, err
	}
	if fi.Size() != h.Size {
		f.Close()
		return nil, 0, nil, p, fmt.Errorf("%w: state file %s is %d bytes, _metadata says %d", snapshotfmt.ErrCorrupt, p, fi.Size(), h.Size)
	}
	return f, fi.Size(), f, p, nil
}

// CheckWidth tells whether Flink can start the savepoint's keyed operators
// at parallelism p: p must not exceed the max parallelism (Flink refuses
// "The maximum parallelism (M) of the restored state is lower than the
// configured parallelism (p)").
func (sp *Savepoint) CheckWidth(p int) error {
	m := sp.MaxParallelism()
	if p < 1 {
		return fmt.Errorf("%w: parallelism %d", snapshotfmt.ErrInvalidArgument, p)
	}
	if p > m {
		return fmt.Errorf("%w: parallelism %d is above the savepoint's max parallelism %d: Flink refuses to restore it; rewrite it to a max parallelism of at least %d first", snapshotfmt.ErrRefused, p, m, p)
	}
	return nil
}
