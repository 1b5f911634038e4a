package sparkhash

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rebucket/rebucket/internal/unsaferow"
)

// goValue turns a vector's JSON value into what unsaferow.Encode takes.
func goValue(t *unsaferow.Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t.Kind {
	case unsaferow.String:
		return v.(string), nil
	case unsaferow.Int, unsaferow.Date:
		return int32(v.(float64)), nil
	case unsaferow.Short:
		return int16(v.(float64)), nil
	case unsaferow.Byte:
		return int8(v.(float64)), nil
	case unsaferow.Long, unsaferow.Timestamp:
		n, err := strconv.ParseInt(v.(string), 10, 64)
		return n, err
	case unsaferow.Double:
		return strconv.ParseFloat(v.(string), 64)
	case unsaferow.Float:
		f, err := strconv.ParseFloat(v.(string), 32)
		return float32(f), err
	case unsaferow.Boolean:
		return v.(bool), nil
	case unsaferow.Binary:
		return hex.DecodeString(v.(string))
	case unsaferow.Decimal:
		s := v.(string)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		ip, fp, _ := strings.Cut(s, ".")
		fp += strings.Repeat("0", t.Scale-len(fp))
		u, ok := new(big.Int).SetString(ip+fp, 10)
		if !ok {
			return nil, fmt.Errorf("decimal %q", v)
		}
		if neg {
			u.Neg(u)
		}
		return unsaferow.DecimalValue{Unscaled: u, Scale: t.Scale}, nil
	}
	return nil, fmt.Errorf("type %s", t)
}

// TestSparkVectors checks every row of testdata/hash_vectors.tsv, printed
// by Spark 4.3.0's own hash() and pmod() (gen_hash_vectors.py): the key is
// encoded as an UnsafeRow and hashed as a state key would be.
func TestSparkVectors(t *testing.T) {
	f, err := os.Open("../testdata/hash_vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 7 {
			t.Fatalf("bad line %q", sc.Text())
		}
		var types []string
		var vals []any
		if err := json.Unmarshal([]byte(cols[0]), &types); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cols[1]), &vals); err != nil {
			t.Fatal(err)
		}
		var fields []string
		for i, ty := range types {
			fields = append(fields, fmt.Sprintf(`{"name":"c%d","type":%q,"nullable":true,"metadata":{}}`, i, ty))
		}
		schema, err := unsaferow.ParseSchema([]byte(`{"type":"struct","fields":[` + strings.Join(fields, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		gv := make([]any, len(vals))
		for i, v := range vals {
			if gv[i], err = goValue(schema.Fields[i].Type, v); err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
		}
		row, err := unsaferow.Encode(schema, gv)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := unsaferow.NewRow(row, len(schema.Fields))
		h, err := HashRow(schema, r, nil, Seed)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseInt(cols[2], 10, 32)
		if h != int32(want) {
			t.Errorf("%s %s: hash %d, Spark %d", cols[0], cols[1], h, want)
			continue
		}
		for j, m := range []int{2, 3, 8, 200} {
			p, err := Partition(schema, row, nil, m)
			wantP, _ := strconv.Atoi(cols[3+j])
			if err != nil || p != wantP {
				t.Errorf("%s %s: pmod(.., %d) = %d, Spark %d (%v)", cols[0], cols[1], m, p, wantP, err)
			}
		}
		n++
	}
	if n < 70 {
		t.Fatalf("only %d vectors", n)
	}
}

func TestPmod(t *testing.T) {
	for _, tc := range []struct {
		h    int32
		n, p int
	}{{-1, 8, 7}, {math.MinInt32, 3, 1}, {math.MaxInt32, 200, 47}, {0, 5, 0}, {-9, 3, 0}} {
		if got := Pmod(tc.h, tc.n); got != tc.p {
			t.Errorf("Pmod(%d,%d)=%d want %d", tc.h, tc.n, got, tc.p)
		}
	}
	// The 32-bit division agrees with the 64-bit definition at the edges.
	for _, h := range []int32{math.MinInt32, math.MinInt32 + 1, -65537, -1, 0, 1, 65536, math.MaxInt32} {
		for _, n := range []int{1, 2, 3, 7, 8, 200, 65536, math.MaxInt32 - 1, math.MaxInt32} {
			want := ((int(h) % n) + n) % n
			if got := Pmod(h, n); got != want {
				t.Errorf("Pmod(%d,%d)=%d want %d", h, n, got, want)
			}
		}
	}
}

func TestColumnSubset(t *testing.T) {
	s, _ := unsaferow.ParseSchema([]byte(`{"type":"struct","fields":[{"name":"a","type":"string","nullable":true,"metadata":{}},{"name":"b","type":"integer","nullable":true,"metadata":{}}]}`))
	row, _ := unsaferow.Encode(s, []any{"k", int32(5)})
	r, _ := unsaferow.NewRow(row, 2)
	got, _ := HashRow(s, r, []int{1}, Seed)
	if want := HashInt(5, Seed); got != want {
		t.Fatalf("column subset hash %d, want %d", got, want)
	}
	both, _ := HashRow(s, r, []int{0, 1}, Seed)
	if want := HashInt(5, HashBytes([]byte("k"), Seed)); both != want {
		t.Fatalf("chained %d want %d", both, want)
	}
}
