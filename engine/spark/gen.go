package spark

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/lz4java"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// GenerateOptions shape a generated checkpoint.
type GenerateOptions struct {
	// Keys is the number of distinct keys "k0".."k<Keys-1>".
	Keys int
	// Partitions is the state partition count N (default 2).
	Partitions int
	// InputDir is the directory the query's file source reads (recorded in
	// sources/0/0); default "/tmp/rebucket-spark-gen-input".
	InputDir string
	// Snapshot writes 1.snapshot instead of 1.delta in every partition.
	Snapshot bool
}

// GenKeySchema and GenValueSchema are the state schemas of the generated
// query, as Spark 4.3 writes them for
// spark.readStream.schema(GenInputSchema).json(dir).groupBy("k").count().
const (
	GenKeySchema   = `{"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}]}`
	GenValueSchema = `{"type":"struct","fields":[{"name":"count","type":"long","nullable":true,"metadata":{}}]}`
	GenInputSchema = "k string"
)

// GenCount is the count the generated state holds for key k<i>.
func GenCount(i int) int64 { return int64(i%5) + 1 }

// genConf is the offsets conf Spark 4.3.0 records for the query (measured).
const genConf = `{"spark.sql.streaming.stateStore.providerClass":"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider","spark.sql.dropDuplicates.deterministicKeyOrder.enabled":"true","spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion":"2","spark.sql.streaming.stateStore.rocksdb.formatVersion":"5","spark.sql.streaming.queryEvolution.enableSourceEvolution":"false","spark.sql.streaming.stateStore.encodingFormat":"unsaferow","spark.sql.streaming.statefulOperator.useStrictDistribution":"true","spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion":"2","spark.sql.streaming.multipleWatermarkPolicy":"min","spark.sql.streaming.stateStore.rowChecksum.enabled":"false","spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled":"true","spark.sql.streaming.aggregation.stateFormatVersion":"2","spark.sql.function.protobufExtensions.enabled":"false","spark.sql.shuffle.partitions":"%d","spark.sql.streaming.join.stateFormatVersion":"2","spark.sql.streaming.stateStore.compression.codec":"lz4","spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan":"false"}`

// Generate writes a checkpoint of a string-keyed count aggregation after
// one committed batch (batch 0, state version 1), HDFS-backed, as Spark
// 4.3.0 lays it out (with Hadoop .crc side files), for benchmarks and
// restart trials: key k<i> has count GenCount(i), in partition
// pmod(murmur3(k), N). dir must not exist.
func Generate(dir string, opts GenerateOptions) error {
	if opts.Keys < 0 {
		return fmt.Errorf("%w: %d keys", snapshotfmt.ErrInvalidArgument, opts.Keys)
	}
	if opts.Partitions <= 0 {
		opts.Partitions = 2
	}
	if opts.InputDir == "" {
		opts.InputDir = "/tmp/rebucket-spark-gen-input"
	}
	n := opts.Partitions
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"offsets", "commits", "sources/0", "state/0/_metadata", "state/0/0/_metadata"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	h := hex.EncodeToString(id[:])
	uuid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	now := time.Now().UnixMilli()
	inputFile := "file://" + filepath.ToSlash(filepath.Join(opts.InputDir, "gen-0.json"))
	files := map[string]string{
		"metadata":                   `{"id":"` + uuid + `"}`,
		"offsets/0":                  "v1\n" + fmt.Sprintf(`{"batchWatermarkMs":0,"batchTimestampMs":%d,"conf":`, now) + fmt.Sprintf(genConf, n) + "}\n" + `{"logOffset":0}`,
		"commits/0":                  "v1\n" + `{"nextBatchWatermarkMs":0}`,
		"sources/0/0":                "v1\n" + fmt.Sprintf(`{"path":%q,"timestamp":%d,"batchId":0}`, inputFile, now),
		"state/0/_metadata/metadata": "v1\n" + fmt.Sprintf(`{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":%d}]}`, n),
		"state/0/0/_metadata/schema": string(schemaFileV2(GenKeySchema, GenValueSchema)),
	}
	for name, body := range files {
		if err := writeFileCRC(filepath.Join(dir, name), []byte(body)); err != nil {
			return err
		}
	}
	ks, _ := unsaferow.ParseSchema([]byte(GenKeySchema))
	vs, _ := unsaferow.ParseSchema([]byte(GenValueSchema))
	name := "1.delta"
	if opts.Snapshot {
		name = "1.snapshot"
	}
	ws := make([]*genWriter, n)
	for p := range n {
		d := filepath.Join(dir, "state", "0", strconv.Itoa(p))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(d, name))
		if err != nil {
			return err
		}
		c := newCRCWriter(f)
		bw := bufio.NewWriterSize(c, 256<<10)
		ws[p] = &genWriter{f: f, crc: c, bw: bw, z: lz4java.NewWriter(bw, 0)}
	}
	var rec []byte
	for i := range opts.Keys {
		k, _ := unsaferow.Encode(ks, []any{"k" + strconv.Itoa(i)})
		v, _ := unsaferow.Encode(vs, []any{GenCount(i)})
		p, err := sparkhash.Partition(ks, k, []int{0}, n)
		if err != nil {
			return err
		}
		rec = AppendRecord(rec[:0], k, v, false)
		if _, err := ws[p].z.Write(rec); err != nil {
			return err
		}
	}
	for _, w := range ws {
		if err := w.close(); err != nil {
			return err
		}
	}
	return nil
}

type genWriter struct {
	f   *os.File
	crc *crcWriter
	bw  *bufio.Writer
	z   *lz4java.Writer
}

func (w *genWriter) close() error {
	if _, err := w.z.Write(EndRecord); err != nil {
		return err
	}
	if err := w.z.Close(); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	return os.WriteFile(crcPath(w.f.Name()), w.crc.side(), 0o644)
}

// schemaFileV2 encodes a state schema file, format v2: writeUTF("v2"),
// then for the key and the value schema an int32 chunk count and that
// many writeUTF chunks (ASCII JSON assumed, chunks of at most 65535 bytes).
func schemaFileV2(key, value string) []byte {
	b := utf(nil, "v2")
	for _, s := range []string{key, value} {
		var chunks []string
		for len(s) > 65535 {
			chunks = append(chunks, s[:65535])
			s = s[65535:]
		}
		chunks = append(chunks, s)
		b = binary.BigEndian.AppendUint32(b, uint32(len(chunks)))
		for _, c := range chunks {
			b = utf(b, c)
		}
	}
	return b
}

func utf(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
