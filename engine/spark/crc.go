package spark

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Hadoop's LocalFileSystem (ChecksumFileSystem) keeps a side file
// .<name>.crc beside every file: "crc\0", int32 BE bytes per checksum
// (512), then the CRC32 (IEEE) of every 512-byte chunk, big endian.
const crcChunk = 512

// crcWriter passes bytes through and computes the side file's checksums.
type crcWriter struct {
	w     io.Writer
	sums  []byte
	crc   uint32
	inCur int
}

func newCRCWriter(w io.Writer) *crcWriter {
	return &crcWriter{w: w, sums: append([]byte("crc\x00"), 0, 0, 2, 0)}
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	q := p[:n]
	for len(q) > 0 {
		k := min(len(q), crcChunk-c.inCur)
		c.crc = crc32.Update(c.crc, crc32.IEEETable, q[:k])
		c.inCur += k
		q = q[k:]
		if c.inCur == crcChunk {
			c.sums = binary.BigEndian.AppendUint32(c.sums, c.crc)
			c.crc, c.inCur = 0, 0
		}
	}
	return n, err
}

// side returns the side file's bytes for everything written.
func (c *crcWriter) side() []byte {
	if c.inCur > 0 {
		return binary.BigEndian.AppendUint32(c.sums, c.crc)
	}
	return c.sums
}

// HadoopCRC returns the .crc side file of data.
func HadoopCRC(data []byte) []byte {
	c := newCRCWriter(io.Discard)
	c.Write(data)
	return c.side()
}

// crcPath is the side file of path.
func crcPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".crc")
}

// writeFileCRC writes data to path and its Hadoop side file (made
// durable by syncTree before publishing).
func writeFileCRC(path string, data []byte) error {
	if err := writeNew(path, data); err != nil {
		return err
	}
	// A stale side file (of a file removed by hand) is replaced.
	if err := os.Remove(crcPath(path)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return writeNew(crcPath(path), HadoopCRC(data))
}

func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
