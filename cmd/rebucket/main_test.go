package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/rebucket/rebucket/fixtures"
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

// dirHash fingerprints everything under dir (fixtures.TreeHash).
func dirHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := fixtures.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
