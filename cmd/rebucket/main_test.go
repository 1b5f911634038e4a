package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/rebucket/rebucket/snapshotfmt"
)

// runCLI runs one command line as main does: stdout, stderr, exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// runRoot is runCLI with stdout and stderr (and the error main would
// print) in one string.
func runRoot(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	return out + errOut, code
}

func dirHash(t *testing.T, dir string) string {
	t.Helper()
	h := xxh3.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		h.WriteString(p + "\n")
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snapshotfmt.Sum128Hex(h.Sum128())
}
