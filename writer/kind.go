package writer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// Kind is what a run may replace under --force: only what rebucket itself
// could have written. A non-empty directory target is replaced only when
// Check recognizes it as an earlier output of the same kind; anything else
// (a home directory, a dataset, a device) is refused, whatever the flags.
type Kind struct {
	// Name says what the kind is, for messages ("snapshot").
	Name string
	// Check returns nil when dir (a non-empty directory) holds an output
	// of this kind, else what it lacks.
	Check func(dir string) error
}

// SnapshotKind is a snapshot: a directory whose MANIFEST.json is a regular
// file declaring this format. Begin and Create use it.
var SnapshotKind = Kind{Name: "snapshot", Check: checkSnapshotDir}

func checkSnapshotDir(dir string) error {
	p := filepath.Join(dir, snapshotfmt.ManifestName)
	if err := RegularFile(p); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	// The format name is the manifest's first member as the writer writes
	// it; read members until it, never the whole of a large manifest.
	dec := json.NewDecoder(io.LimitReader(f, 1<<20))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%s is not a JSON object", p)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		if k == "format" {
			var v string
			if dec.Decode(&v) == nil && v == snapshotfmt.FormatName {
				return nil
			}
			break
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return fmt.Errorf("%s does not declare the format %q", p, snapshotfmt.FormatName)
}

// RegularFile returns nil when p is a regular file (not followed through
// a symbolic link), else an error saying what it is. --force replaces a
// file only if it is one: rebucket never writes device nodes, FIFOs,
// sockets or symbolic links, and replacing /dev/null is not its business.
func RegularFile(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s, not a regular file", p, describeMode(st.Mode()))
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}

// CheckReplaceFile refuses (ErrRefused) to replace p under --force unless
// it is a regular file. A missing p is fine.
func CheckReplaceFile(p string) error {
	err := RegularFile(p)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%w: %v; --force replaces only a regular file rebucket could have written; choose another --out", snapshotfmt.ErrRefused, err)
}
