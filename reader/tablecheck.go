package reader

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// checkTableBlocks refuses what a snapshot table must not hold besides its
// point entries (FORMAT.md section 10): a range-deletion or range-key
// block (only sets belong in a snapshot; a point iteration never shows
// these, yet a store that ingests the table applies them), and a table
// format other than the one the format fixes.
func checkTableBlocks(ctx context.Context, r *sstable.Reader) error {
	if tf, err := r.TableFormat(); err != nil {
		return err
	} else if tf != sstable.TableFormatPebblev4 {
		return fmt.Errorf("table format %s, the snapshot format fixes %s", tf, sstable.TableFormatPebblev4)
	}
	del, err := r.NewRawRangeDelIter(ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if del != nil {
		del.Close()
		return errors.New("the table has a range-deletion block: only sets belong in a snapshot")
	}
	rk, err := r.NewRawRangeKeyIter(ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if rk != nil {
		rk.Close()
		return errors.New("the table has a range-key block: only sets belong in a snapshot")
	}
	return nil
}

// stateKinds maps the manifest's state ids to their kinds, for the key
// checks of every iteration.
func stateKinds(m *snapshotfmt.Manifest) map[uint16]snapshotfmt.Kind {
	out := make(map[uint16]snapshotfmt.Kind, len(m.States))
	for _, s := range m.States {
		out[s.ID] = s.Kind
	}
	return out
}

// checkKey checks an entry's encoded key against FORMAT.md sections 4 and
// 6: it decodes, names a state of the manifest, carries a sub-key only for
// map state, and (unless the caller reports that itself) is stored in the
// bucket its key hashes to. A start would never find a misplaced entry,
// and a store that ingests it holds a key its owner cannot reach.
func (fi *FileIter) checkKey(k []byte) error {
	dk, err := snapshotfmt.DecodeKey(k)
	if err != nil {
		return fmt.Errorf("%s: key %s: %w", fi.df.Path, shortHex(k), err)
	}
	// Entries come grouped by state within a bucket: remember the last.
	kind, ok := fi.lastKind, fi.haveLast && fi.lastState == dk.State
	if !ok {
		kind, ok = fi.kinds[dk.State]
		fi.lastState, fi.lastKind, fi.haveLast = dk.State, kind, ok
	}
	if !ok {
		return fmt.Errorf("%w: %s: key %s has state id %d, which is not in the manifest's states table", snapshotfmt.ErrCorrupt, fi.df.Path, shortHex(k), dk.State)
	}
	if kind != snapshotfmt.KindMap && len(dk.SubKey) > 0 {
		return fmt.Errorf("%w: %s: key %s has %d bytes after the key of %s state %d, which has no sub-key", snapshotfmt.ErrCorrupt, fi.df.Path, shortHex(k), len(dk.SubKey), kind, dk.State)
	}
	if !fi.allowMisplaced {
		fi.hash, fi.hashed = snapshotfmt.HashKey(dk.Key), true
		if b := fi.part.BucketOfHash(fi.hash); b != dk.Bucket {
			return fmt.Errorf("%w: %s: key %s is stored in bucket %d but hashes to bucket %d under %s", snapshotfmt.ErrCorrupt, fi.df.Path, shortHex(k), dk.Bucket, b, fi.part)
		}
	}
	return nil
}

// shortHex is a key for an error message: whole up to 64 bytes, else its
// start (a key may be megabytes long).
func shortHex(k []byte) string {
	const max = 64
	if len(k) <= max {
		return fmt.Sprintf("%x", k)
	}
	return fmt.Sprintf("%x... (%d bytes)", k[:max], len(k))
}
