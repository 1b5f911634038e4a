package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/snapshotfmt"
)

func init() { registerCommand(newLocateCommand) }

type locateOptions struct {
	width     int
	keyFormat string
	limit     int
}

func newLocateCommand(g *globalOptions) *cobra.Command {
	o := &locateOptions{}
	cmd := &cobra.Command{
		Use:   "locate SNAPSHOT KEY",
		Short: "Show a key's hash, bucket, owning worker at a width, and its entries in every state",
		Long: `locate hashes KEY the way every writer does (XXH3-64 of the key bytes),
maps it to its bucket under the snapshot's partitioning, names the worker that
owns that bucket at --width (default: the width the snapshot was written at),
and lists the key's entries in every keyed state (for map state, every
sub-key). KEY is UTF-8 text, or hex with --key-format hex.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLocate(cmd, g, o, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.width, "width", 0, "width to name the owner at (default: the width at write)")
	f.StringVar(&o.keyFormat, "key-format", "utf8", "how KEY is written: utf8 or hex")
	f.IntVar(&o.limit, "limit", 100, "most entries to list per state in the human output (--json lists all)")
	return cmd
}

type locateEntry struct {
	Step     string `json:"step"`
	State    string `json:"state"`
	Kind     string `json:"kind"`
	SubKey   string `json:"sub_key,omitempty"`
	SubKeyHx string `json:"sub_key_hex,omitempty"`
	Value    string `json:"value"`
	ValueHex string `json:"value_hex"`
	File     string `json:"file"`
}

type locateReport struct {
	Snapshot     string                   `json:"snapshot"`
	Key          string                   `json:"key"`
	KeyHex       string                   `json:"key_hex"`
	Hash         uint64                   `json:"hash"`
	HashHex      string                   `json:"hash_hex"`
	Partitioning snapshotfmt.Partitioning `json:"partitioning"`
	Bucket       uint32                   `json:"bucket"`
	Width        int                      `json:"width"`
	// Owner is the worker owning the bucket at Width; above the bucket
	// count this is the owner under --on-excess idle (cap: worker Bucket).
	Owner       int            `json:"owner"`
	WorkerLo    int            `json:"owner_bucket_lo"`
	WorkerHi    int            `json:"owner_bucket_hi"`
	AboveN      bool           `json:"width_above_buckets"`
	Entries     []locateEntry  `json:"entries"`
	EntryCounts map[string]int `json:"entries_per_state"`
}

func runLocate(cmd *cobra.Command, g *globalOptions, o *locateOptions, dir, keyArg string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if err := checkWidthFlag(cmd, "width"); err != nil {
		return err
	}
	if err := setPositive(cmd, math.MaxInt32, "limit"); err != nil {
		return err
	}
	var key []byte
	switch o.keyFormat {
	case "utf8":
		key = []byte(keyArg)
	case "hex":
		k, err := hex.DecodeString(keyArg)
		if err != nil {
			return usagef(fmt.Errorf("KEY %q is not hex: %w", keyArg, err))
		}
		key = k
	default:
		return usagef(fmt.Errorf("--key-format %q: want utf8 or hex", o.keyFormat))
	}
	s, err := reader.Open(dir, reader.Options{})
	if err != nil {
		return err
	}
	m := s.Manifest()
	n := int(m.Partitioning.Buckets)
	w := o.width
	if w == 0 {
		w = m.WidthAtWrite
	}
	if w < 1 {
		return usagef(fmt.Errorf("--width %d: want at least 1", w))
	}
	h := snapshotfmt.HashKey(key)
	b := m.Partitioning.BucketOfHash(h)
	owner := snapshotfmt.OwnerOf(int(b), w, n)
	lo, hi, _ := snapshotfmt.WorkerRange(owner, w, n)
	rep := locateReport{
		Snapshot: dir, Key: displayBytes(key), KeyHex: hex.EncodeToString(key), Hash: h, HashHex: fmt.Sprintf("%016x", h),
		Partitioning: m.Partitioning, Bucket: b, Width: w, Owner: owner, WorkerLo: lo, WorkerHi: hi, AboveN: w > n,
		Entries: []locateEntry{}, EntryCounts: map[string]int{},
	}
	files := s.FilesIn(b, b)
	for _, st := range m.States {
		rep.EntryCounts[st.QualifiedName()] = 0
		prefix := snapshotfmt.EncodeKey(b, st.ID, key, nil)
		upper := prefixSuccessor(prefix)
		for _, df := range files {
			if string(df.LargestKey()) < string(prefix) || string(df.SmallestKey()) >= string(upper) {
				continue
			}
			fi, err := s.OpenFile(ctx, df, prefix, upper)
			if err != nil {
				return err
			}
			for fi.Next() {
				dk, err := snapshotfmt.DecodeKey(fi.Key())
				if err != nil || !bytes.Equal(dk.Key, key) {
					continue
				}
				e := locateEntry{Step: st.Step, State: st.Name, Kind: string(st.Kind), File: df.Path,
					Value: decodeValue(st.ValueCodec, fi.Value()), ValueHex: hex.EncodeToString(fi.Value())}
				if st.Kind == snapshotfmt.KindMap {
					e.SubKey, e.SubKeyHx = displayBytes(dk.SubKey), hex.EncodeToString(dk.SubKey)
				}
				rep.Entries = append(rep.Entries, e)
				rep.EntryCounts[st.QualifiedName()]++
			}
			err = fi.Err()
			fi.Close()
			if err != nil {
				return err
			}
		}
	}
	if g.JSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	renderLocate(cmd.OutOrStdout(), &rep, m, o.limit)
	return nil
}

func renderLocate(w io.Writer, r *locateReport, m *snapshotfmt.Manifest, limit int) {
	fmt.Fprintf(w, "key      %s (hex %s)\n", r.Key, r.KeyHex)
	fmt.Fprintf(w, "hash     %s (XXH3-64 of the key bytes: %d)\n", r.HashHex, r.Hash)
	fmt.Fprintf(w, "bucket   %d of %d (%s)\n", r.Bucket, r.Partitioning.Buckets, r.Partitioning.Mapping)
	if r.AboveN {
		fmt.Fprintf(w, "owner    width %d is above the bucket count %d: under --on-excess idle worker %d owns it, under cap worker %d\n",
			r.Width, r.Partitioning.Buckets, r.Owner, r.Bucket)
	} else {
		fmt.Fprintf(w, "owner    worker %d of %d (owns buckets %d..%d)\n", r.Owner, r.Width, r.WorkerLo, r.WorkerHi)
	}
	if len(r.Entries) == 0 {
		fmt.Fprintf(w, "entries  none: the key is not in this snapshot\n")
	} else {
		fmt.Fprintf(w, "entries  %d\n", len(r.Entries))
	}
	for _, st := range m.States {
		qn := st.QualifiedName()
		fmt.Fprintf(w, "\n  %s (%s): %d entries\n", qn, st.Kind, r.EntryCounts[qn])
		shown := 0
		for _, e := range r.Entries {
			if e.Step != st.Step || e.State != st.Name {
				continue
			}
			if shown == limit {
				fmt.Fprintf(w, "    ... %d more (--json lists all)\n", r.EntryCounts[qn]-limit)
				break
			}
			shown++
			if st.Kind == snapshotfmt.KindMap {
				fmt.Fprintf(w, "    [%s] %s\n", e.SubKey, truncate(e.Value, 100))
			} else {
				fmt.Fprintf(w, "    %s\n", truncate(e.Value, 100))
			}
		}
	}
}

// prefixSuccessor is the smallest key above every key with this prefix.
func prefixSuccessor(p []byte) []byte {
	out := bytes.Clone(p)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] != 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}

// decodeValue shows a value by its codec hint.
func decodeValue(codec string, v []byte) string {
	switch codec {
	case "int64":
		if len(v) == 8 {
			return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10)
		}
	case "utf8", "json":
		if utf8.Valid(v) {
			return string(v)
		}
	}
	return "0x" + hex.EncodeToString(v)
}

func displayBytes(b []byte) string {
	if utf8.Valid(b) {
		for _, r := range string(b) {
			if r < 0x20 || r == 0x7f {
				return "0x" + hex.EncodeToString(b)
			}
		}
		return string(b)
	}
	return "0x" + hex.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
