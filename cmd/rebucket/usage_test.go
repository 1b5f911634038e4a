package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// Errors of the command line itself exit 2, never 4 (which scripts read as
// an I/O failure).
func TestCommandLineErrorsExitUsage(t *testing.T) {
	for _, args := range [][]string{
		{"rewrtie"},
		{"rewrite", "snap"},
		{"rewrite", "snap", "--buckets", "8"},
		{"load", "snap", "--width", "4"},
		{"export", "snap"},
		{"import", "ds.parquet", "--out", "x"},
		{"generate"},
		{"split", "snap", "--out", "a"},
		{"inspect"},
		{"inspect", "a", "b"},
		{"rewrite", "snap", "--buckets", "eight", "--out", "x"},
		{"verify", "snap", "--no-such-flag"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
		if !strings.Contains(errOut, "--help") {
			t.Errorf("%q: the message does not say where usage is: %s", args, errOut)
		}
	}
}

// Under --json an error is one JSON object with the code, the message and a
// hint, not a line of text.
func TestJSONErrorObject(t *testing.T) {
	_, errOut, code := runCLI(t, "--json", "load", "snap", "--width", "4")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	var rep errorReport
	if err := json.Unmarshal([]byte(errOut), &rep); err != nil {
		t.Fatalf("stderr is not one JSON object: %v\n%s", err, errOut)
	}
	if rep.Type != "error" || rep.ExitCode != exitUsage || !strings.Contains(rep.Message, "into") || rep.Hint == "" {
		t.Fatalf("error object %+v", rep)
	}

	_, errOut, code = runCLI(t, "--json", "inspect", t.TempDir()+"/missing")
	if code != exitUsage {
		t.Fatalf("missing snapshot: exit %d", code)
	}
	if err := json.Unmarshal([]byte(errOut), &rep); err != nil || rep.ExitCode != exitUsage {
		t.Fatalf("missing snapshot: %v %+v\n%s", err, rep, errOut)
	}
}

func TestVersionLine(t *testing.T) {
	out, _, code := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "rebucket ") || !strings.Contains(out, "commit ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
}
