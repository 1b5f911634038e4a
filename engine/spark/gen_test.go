package spark

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The generated schema file is byte-identical to Spark 4.3.0's.
func TestGenSchemaFileMatchesSpark(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(realDir(t, "agg_str"), "state/0/0/_metadata/schema"))
	if err != nil {
		t.Fatal(err)
	}
	if got := schemaFileV2(GenKeySchema, GenValueSchema); !bytes.Equal(got, want) {
		t.Fatalf("schema file\n got %q\nwant %q", got, want)
	}
	// And Spark's .crc side file is what HadoopCRC computes.
	crc, _ := os.ReadFile(filepath.Join(realDir(t, "agg_str"), "state/0/0/_metadata/.schema.crc"))
	if !bytes.Equal(HadoopCRC(want), crc) {
		t.Fatalf("crc %x, Spark wrote %x", HadoopCRC(want), crc)
	}
}

func TestHadoopCRCOfRealFiles(t *testing.T) {
	d := realDir(t, "agg_str")
	n := 0
	filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || filepath.Ext(p) == ".crc" {
			return err
		}
		side, err := os.ReadFile(crcPath(p))
		if err != nil {
			return nil
		}
		data, _ := os.ReadFile(p)
		if !bytes.Equal(HadoopCRC(data), side) {
			t.Errorf("%s: crc differs", p)
		}
		n++
		return nil
	})
	if n < 10 {
		t.Fatalf("only %d files checked", n)
	}
}

func TestGenerateVerifyRewrite(t *testing.T) {
	for _, snap := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "ck")
		if err := Generate(dir, GenerateOptions{Keys: 5000, Partitions: 2, Snapshot: snap}); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(context.Background(), dir, ScanOptions{})
		if err != nil || rep.FindingsTotal != 0 || rep.Rows != 5000 {
			t.Fatalf("verify: %+v %v", rep, err)
		}
		dst := filepath.Join(t.TempDir(), "out")
		// A budget below one partition: partitions load one at a time.
		if _, err := Rewrite(context.Background(), dir, dst, RewriteOptions{Partitions: 8, Memory: 1}); err != nil {
			t.Fatal(err)
		}
		eq, err := Equal(context.Background(), dir, dst, ScanOptions{})
		if err != nil || !eq.Equal {
			t.Fatalf("%+v %v", eq, err)
		}
	}
}

func TestLoadEstimate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	if err := Generate(dir, GenerateOptions{Keys: 1000, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// 1000 records of 4+24+4+16 bytes and the end mark, twice.
	if got, want := loadEstimate(filepath.Join(dir, "state", "0", "0"), 1), int64(2*(1000*48+4)); got != want {
		t.Fatalf("estimate %d, want %d", got, want)
	}
}
