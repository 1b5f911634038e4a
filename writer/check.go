package writer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// CheckTarget runs the checks Begin runs on a target (its parent exists;
// it does not exist, or is an empty directory, or force) without taking
// the lock or creating anything: for dry runs. flag names the command's
// target flag (--out, --into) in the refusal.
func CheckTarget(target string, force bool, flag string) error {
	return CheckTargetKind(target, force, flag, SnapshotKind)
}

// CheckTargetKind is CheckTarget for an output of another kind (BeginKind).
func CheckTargetKind(target string, force bool, flag string, kind Kind) error {
	abs, err := filepath.Abs(target)
	if err != nil {
		return fmt.Errorf("target %s: %w", target, err)
	}
	parent := filepath.Dir(abs)
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: target %s: parent directory %s does not exist; create it first", snapshotfmt.ErrInvalidArgument, target, parent)
	}
	if err := checkTarget(abs, force, kind); err != nil {
		return RenameFlag(err, flag)
	}
	return RenameFlag(checkNotMountPoint(abs), flag)
}

// RenameFlag rewrites a target refusal of Begin or Create, which speaks of
// --out, for a command whose target flag is flag (load's --into).
func RenameFlag(err error, flag string) error {
	if err == nil || flag == "" || flag == "--out" {
		return err
	}
	return renamedFlag{err, flag}
}

type renamedFlag struct {
	err  error
	flag string
}

func (e renamedFlag) Error() string { return replaceFlag(e.err.Error(), e.flag) }
func (e renamedFlag) Unwrap() error { return e.err }

func replaceFlag(msg, flag string) string {
	return strings.ReplaceAll(msg, "another --out", "another "+flag)
}
