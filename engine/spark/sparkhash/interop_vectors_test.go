package sparkhash

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/unsaferow"
)

var sqlToJSON = map[string]string{
	"string": "string", "binary": "binary", "boolean": "boolean", "tinyint": "byte", "smallint": "short",
	"int": "integer", "bigint": "long", "float": "float", "double": "double", "date": "date",
	"timestamp": "timestamp", "timestamp_ntz": "timestamp_ntz",
}

func interopValue(t *unsaferow.Type, s string) (any, error) {
	if s == "null" {
		return nil, nil
	}
	switch t.Kind {
	case unsaferow.String, unsaferow.Binary:
		b, err := hex.DecodeString(strings.TrimPrefix(s, "x"))
		if t.Kind == unsaferow.String {
			return string(b), err
		}
		return b, err
	case unsaferow.Boolean:
		return s == "true", nil
	case unsaferow.Byte:
		v, err := strconv.ParseInt(s, 10, 8)
		return int8(v), err
	case unsaferow.Short:
		v, err := strconv.ParseInt(s, 10, 16)
		return int16(v), err
	case unsaferow.Int, unsaferow.Date:
		v, err := strconv.ParseInt(s, 10, 32)
		return int32(v), err
	case unsaferow.Long, unsaferow.Timestamp, unsaferow.TimestampNTZ:
		return strconv.ParseInt(s, 10, 64)
	case unsaferow.Float:
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
		return math.Float32frombits(uint32(v)), err
	case unsaferow.Double:
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		return math.Float64frombits(v), err
	case unsaferow.Decimal:
		u, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("decimal %q", s)
		}
		return unsaferow.DecimalValue{Unscaled: u, Scale: t.Scale}, nil
	}
	return nil, fmt.Errorf("type %s", t)
}

// TestInteropVectors checks the 145 vectors another session printed with
// pyspark 4.3.0 (interop/spark/hash_vectors.py; copied to
// testdata/hash_vectors_interop.tsv): float and double bit patterns
// (NaNs, -0.0, subnormals), timestamp_ntz, decimals to 38 digits.
func TestInteropVectors(t *testing.T) {
	f, err := os.Open("../testdata/hash_vectors_interop.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "types\t") {
			continue
		}
		cols := strings.Split(line, "\t")
		types, vals := strings.Split(cols[0], ";"), strings.Split(cols[1], ";")
		var fields []string
		for i, ty := range types {
			js, ok := sqlToJSON[ty]
			if !ok {
				js = ty // decimal(p,s)
			}
			fields = append(fields, fmt.Sprintf(`{"name":"c%d","type":%q,"nullable":true,"metadata":{}}`, i, js))
		}
		schema, err := unsaferow.ParseSchema([]byte(`{"type":"struct","fields":[` + strings.Join(fields, ",") + `]}`))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		gv := make([]any, len(vals))
		for i, v := range vals {
			if gv[i], err = interopValue(schema.Fields[i].Type, v); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
		row, err := unsaferow.Encode(schema, gv)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		r, _ := unsaferow.NewRow(row, len(schema.Fields))
		h, err := HashRow(schema, r, nil, Seed)
		want, _ := strconv.ParseInt(cols[2], 10, 32)
		if err != nil || h != int32(want) {
			t.Errorf("%s: hash %d, Spark %s (%v)", line, h, cols[2], err)
			continue
		}
		for j, m := range []int{2, 3, 8, 200} {
			if p, _ := strconv.Atoi(cols[3+j]); Pmod(h, m) != p {
				t.Errorf("%s: pmod %d = %d, Spark %d", line, m, Pmod(h, m), p)
			}
		}
		n++
	}
	if n < 145 {
		t.Fatalf("only %d vectors", n)
	}
}
