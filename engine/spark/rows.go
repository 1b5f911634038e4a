package spark

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// Row is one state row as ForEachRow hands it out.
type Row struct {
	Operator  *Operator
	Store     *Store
	Partition int
	Key       []byte // UnsafeRow by Store.KeySchema; valid during the call
	Value     []byte // UnsafeRow by Store.ValueSchema; valid during the call
}

// ForEachRow calls fn for every row of every operator and store at the
// committed version, partition by partition (for export and locate;
// decode Key/Value with unsaferow.Decode and the store's schemas).
func (c *Checkpoint) ForEachRow(ctx context.Context, fn func(Row) error) error {
	for _, op := range c.Operators {
		for _, s := range op.Stores {
			for p := 0; p < c.Partitions; p++ {
				if err := ctx.Err(); err != nil {
					return err
				}
				_, _, err := c.layout.forEachRow(s, s.Dir(op.Dir, p), c.StateVersion(), func(k, v []byte) error {
					return fn(Row{Operator: op, Store: s, Partition: p, Key: k, Value: v})
				})
				if err != nil {
					return fmt.Errorf("state/%d store %s partition %d: %w", op.ID, s.Name, p, err)
				}
			}
		}
	}
	return nil
}

// PartitionOf is the partition Spark puts a key row of store s in, among n.
func PartitionOf(s *Store, key []byte, n int) (int, error) {
	if s.KeyCols == nil {
		return 0, fmt.Errorf("%w: no partition key known for store %s", snapshotfmt.ErrUnsupported, s.Name)
	}
	return sparkhash.Partition(s.KeySchema, key, s.KeyCols, n)
}

// EncodeKey builds the partition-key part of a key row of store s from
// textual values by column name (locate --key COL=VALUE): it returns the
// UnsafeRow of the partition key columns alone, whose hash is the key's,
// and the schema of that row. Values: integers and decimals as written,
// booleans true/false, dates YYYY-MM-DD, timestamps RFC 3339 (UTC if no
// zone), binary as hex, "null" for null.
func EncodeKey(s *Store, vals map[string]string) ([]byte, *unsaferow.Type, error) {
	if s.TWS != nil {
		// the grouping key, which every column family holds
		return encodeCols(s.Name, s.TWS.Grouping, seqCols(len(s.TWS.Grouping.Fields)), vals)
	}
	if s.KeyCols == nil {
		return nil, nil, fmt.Errorf("%w: no partition key known for store %s", snapshotfmt.ErrUnsupported, s.Name)
	}
	return encodeCols(s.Name, s.KeySchema, s.KeyCols, vals)
}

func seqCols(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// encodeCols encodes the columns cols of key schema t from textual values.
func encodeCols(store string, t *unsaferow.Type, cols []int, vals map[string]string) ([]byte, *unsaferow.Type, error) {
	sub := &unsaferow.Type{Kind: unsaferow.Struct}
	var row []any
	used := 0
	for _, i := range cols {
		f := t.Fields[i]
		text, ok := vals[f.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%w: give a value for key column %q (%s)", snapshotfmt.ErrInvalidArgument, f.Name, f.Type)
		}
		used++
		v, err := parseValue(f.Type, text)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: key column %q: %v", snapshotfmt.ErrInvalidArgument, f.Name, err)
		}
		sub.Fields = append(sub.Fields, f)
		row = append(row, v)
	}
	if used != len(vals) {
		var names []string
		for _, i := range cols {
			names = append(names, t.Fields[i].Name)
		}
		return nil, nil, fmt.Errorf("%w: the partition key of store %s has columns %v", snapshotfmt.ErrInvalidArgument, store, names)
	}
	b, err := unsaferow.Encode(sub, row)
	return b, sub, err
}

func parseValue(t *unsaferow.Type, s string) (any, error) {
	if s == "null" {
		return nil, nil
	}
	switch t.Kind {
	case unsaferow.String:
		return s, nil
	case unsaferow.Boolean:
		return strconv.ParseBool(s)
	case unsaferow.Byte:
		v, err := strconv.ParseInt(s, 10, 8)
		return int8(v), err
	case unsaferow.Short:
		v, err := strconv.ParseInt(s, 10, 16)
		return int16(v), err
	case unsaferow.Int:
		v, err := strconv.ParseInt(s, 10, 32)
		return int32(v), err
	case unsaferow.Long:
		return strconv.ParseInt(s, 10, 64)
	case unsaferow.Float:
		v, err := strconv.ParseFloat(s, 32)
		return float32(v), err
	case unsaferow.Double:
		return strconv.ParseFloat(s, 64)
	case unsaferow.Binary:
		return hex.DecodeString(s)
	case unsaferow.Date:
		d, err := time.Parse("2006-01-02", s)
		if err != nil {
			return nil, err
		}
		return int32(d.Unix() / 86400), nil
	case unsaferow.Timestamp, unsaferow.TimestampNTZ:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
			if ts, err := time.Parse(layout, s); err == nil {
				return ts.UnixMicro(), nil
			}
		}
		return nil, fmt.Errorf("timestamp %q: give RFC 3339", s)
	case unsaferow.Decimal:
		neg := strings.HasPrefix(s, "-")
		ip, fp, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
		if len(fp) > t.Scale {
			return nil, fmt.Errorf("%s has more than %d decimals", s, t.Scale)
		}
		u, ok := new(big.Int).SetString(ip+fp+strings.Repeat("0", t.Scale-len(fp)), 10)
		if !ok {
			return nil, fmt.Errorf("decimal %q", s)
		}
		if neg {
			u.Neg(u)
		}
		return unsaferow.DecimalValue{Unscaled: u, Scale: t.Scale}, nil
	}
	return nil, fmt.Errorf("%w: type %s", snapshotfmt.ErrUnsupported, t)
}
