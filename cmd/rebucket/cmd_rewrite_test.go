package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rebucket/rebucket/fixtures"
	"github.com/rebucket/rebucket/plan"
	"github.com/rebucket/rebucket/reader"
	"github.com/rebucket/rebucket/writer"
)

func genRewriteSource(t *testing.T, dir string, keys int) string {
	t.Helper()
	p := filepath.Join(dir, "src")
	if _, err := fixtures.Generate(context.Background(), p, fixtures.Spec{Buckets: 8, Keys: keys}, writer.Options{FileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRewriteCommand(t *testing.T) {
	tmp := t.TempDir()
	src := genRewriteSource(t, tmp, 500)
	dst := filepath.Join(tmp, "dst")

	out, errOut, code := runCLI(t, "rewrite", src, "--buckets", "64", "--out", dst)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"plan: split, mod/8 -> mod/64", "rewrote ", "verified in", "match the fingerprints", "in all 64 buckets"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	s, err := reader.Open(dst, reader.Options{})
	if err != nil || s.Manifest().Partitioning.Buckets != 64 {
		t.Fatalf("target: %v", err)
	}

	// The same target again is refused (exit 3) without printing a plan.
	out, _, code = runCLI(t, "rewrite", src, "--buckets", "64", "--out", dst)
	if code != exitRefused || strings.Contains(out, "plan:") {
		t.Fatalf("existing target: exit %d, %s", code, out)
	}

	// --json: one document with the summary and what was checked.
	dst2 := filepath.Join(tmp, "dst2")
	out, errOut, code = runCLI(t, "--json", "rewrite", src, "--buckets", "13", "--mapping", "range", "--memory", "1MiB", "--out", dst2)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var rep struct {
		Rewrite struct {
			Strategy string  `json:"strategy"`
			Entries  uint64  `json:"entries"`
			Seconds  float64 `json:"elapsed_seconds"`
			Plan     struct {
				Strategy string `json:"strategy"`
			} `json:"plan"`
		} `json:"rewrite"`
		Verification struct {
			Checked  string `json:"checked"`
			Verified bool   `json:"verified"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if rep.Rewrite.Strategy != "shuffle" || rep.Rewrite.Plan.Strategy != "shuffle" || rep.Rewrite.Entries == 0 ||
		rep.Verification.Checked != "fingerprints" || !rep.Verification.Verified {
		t.Fatalf("report %+v", rep)
	}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no verify", []string{"rewrite", src, "--buckets", "4", "--out", filepath.Join(tmp, "d3"), "--no-verify"}, exitOK, "verification skipped"},
		{"drop state", []string{"rewrite", src, "--buckets", "4", "--out", filepath.Join(tmp, "d4"), "--drop-state", "window/events", "--rename-state", "count/per_user=per_key"}, exitOK, "per-worker state is byte-identical (2 states)"},
		{"bad buckets", []string{"rewrite", src, "--buckets", "0", "--out", filepath.Join(tmp, "d5")}, exitUsage, "--buckets"},
		{"bad mapping", []string{"rewrite", src, "--buckets", "4", "--mapping", "hash", "--out", filepath.Join(tmp, "d6")}, exitUsage, "mapping"},
		{"bad memory", []string{"rewrite", src, "--buckets", "4", "--memory", "lots", "--out", filepath.Join(tmp, "d7")}, exitUsage, "--memory"},
		{"unknown state", []string{"rewrite", src, "--buckets", "4", "--drop-state", "a/b", "--out", filepath.Join(tmp, "d8")}, exitUsage, "no such state"},
		{"target in source", []string{"rewrite", src, "--buckets", "4", "--out", filepath.Join(src, "x")}, exitRefused, "lies inside the input"},
		{"not a snapshot", []string{"rewrite", tmp, "--buckets", "4", "--out", filepath.Join(tmp, "d9")}, exitUsage, "MANIFEST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(out+errOut, c.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, c.code, c.want, out, errOut)
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	tmp := t.TempDir()
	src := genRewriteSource(t, tmp, 300)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	out, errOut, code := runCLI(t, "split", src, "--out", a, "--out", b, "--by", "state=count/per_user")
	if code != exitOK || !strings.Contains(out, "by state=count/per_user") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	sa, err := reader.Open(a, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := reader.Open(b, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := reader.Open(src, reader.Options{})
	if sa.Manifest().TotalEntries() != 300 || sa.Manifest().TotalEntries()+sb.Manifest().TotalEntries() != ss.Manifest().TotalEntries() {
		t.Fatalf("entries %d + %d of %d", sa.Manifest().TotalEntries(), sb.Manifest().TotalEntries(), ss.Manifest().TotalEntries())
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"split", src, "--out", filepath.Join(tmp, "x"), "--by", "buckets=0-1"}, exitUsage},
		{[]string{"split", src, "--out", filepath.Join(tmp, "x"), "--out", filepath.Join(tmp, "y"), "--by", "color=red"}, exitUsage},
		{[]string{"split", src, "--out", a, "--out", filepath.Join(tmp, "y"), "--by", "buckets=0-1"}, exitRefused},
	} {
		if _, _, code := runCLI(t, c.args...); code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildBinary builds the command once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rebucket-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "rebucket")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	bigOnce sync.Once
	bigSrc  string
)

// bigSource is a snapshot of 360,000 entries (about 22 MiB logical) shared
// by the tests that run the binary; none of them writes it.
func bigSource(t *testing.T) string {
	t.Helper()
	bigOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(buildBinary(t)), "big")
		if err := os.Mkdir(dir, 0o755); err == nil {
			bigSrc = genRewriteSource(t, dir, 60000)
		}
	})
	if bigSrc == "" {
		t.Fatal("could not generate the shared source")
	}
	return bigSrc
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// TestRewritePeakMemory runs a shuffle of a snapshot at least four times
// --memory in the built binary and checks that it spilled and that its peak
// resident memory stayed within --memory plus plan.FixedOverhead.
func TestRewritePeakMemory(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	src := bigSource(t)
	s, err := reader.Open(src, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const mem = 4 << 20
	if s.Manifest().TotalBytes() < 4*mem {
		t.Fatalf("source of %d bytes is not 4x --memory", s.Manifest().TotalBytes())
	}
	bound := int64(mem + plan.FixedOverhead)
	withinBound(t, func(attempt int) int64 {
		dst := filepath.Join(tmp, fmt.Sprintf("dst%d", attempt))
		out, err := exec.Command(bin, "--json", "rewrite", src, "--buckets", "13", "--out", dst, "--memory", "4MiB", "--no-verify").Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var rep struct {
			Rewrite struct {
				Runs int `json:"spilled_runs"`
			} `json:"rewrite"`
			PeakRSS int64 `json:"peak_rss_bytes"`
		}
		if err := json.Unmarshal(out, &rep); err != nil || rep.Rewrite.Runs < 2 {
			t.Fatalf("spilled runs %d (%v): %s", rep.Rewrite.Runs, err, out)
		}
		t.Logf("peak RSS %d MiB with --memory 4MiB, %d spilled runs", rep.PeakRSS>>20, rep.Rewrite.Runs)
		return rep.PeakRSS
	}, bound)
}

// withinBound runs a measurement of a child process's peak resident memory
// (its own VmHWM: rusage's maxrss would count this test process too) and
// fails when it is above bound twice in a row: a real regression is above
// it every time, while one reading can be inflated by a garbage collection
// starved of CPU on a loaded machine.
func withinBound(t *testing.T, measure func(attempt int) int64, bound int64) {
	t.Helper()
	var peaks []int64
	for attempt := 1; attempt <= 2; attempt++ {
		peak := measure(attempt)
		if peak == 0 {
			t.Skip("no /proc/self/status here")
		}
		if peak <= bound {
			return
		}
		peaks = append(peaks, peak>>20)
	}
	t.Fatalf("peak RSS %v MiB in two runs, above --memory plus the fixed overhead (%d MiB)", peaks, bound>>20)
}

// TestRewriteSIGINT runs the built binary and interrupts it mid-run: exit
// 130, no target, no temporary or spill files, the source unchanged.
func TestRewriteSIGINT(t *testing.T) {
	tmp := t.TempDir()
	bin := buildBinary(t)
	src := bigSource(t)
	before := dirHash(t, src)
	work := filepath.Join(tmp, "work")
	spill := filepath.Join(tmp, "spill")
	for _, d := range []string{work, spill} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(work, "dst")
	cmd := exec.Command(bin, "rewrite", src, "--buckets", "13", "--out", dst, "--memory", "1MiB", "--parallelism", "1", "--tmp", spill)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the run is under way (its temporary directory exists).
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := os.ReadDir(work)
		if len(ents) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v (want %d); output:\n%s", err, exitInterrupted, out.String())
	}
	for _, d := range []string{work, spill} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Fatalf("%s holds %v after the interrupt", d, ents[0].Name())
		}
	}
	if dirHash(t, src) != before {
		t.Fatal("source changed")
	}
}

// --compression reaches the writer: the same entries take more bytes
// without compression and fewer with zstd, every output verifies, the
// --json summary names it, and generate takes the same flag.
func TestRewriteCompressionFlag(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if _, _, code := runCLI(t, "generate", "--out", src, "--buckets", "8", "--keys", "2000", "--compression", "none"); code != exitOK {
		t.Fatalf("generate --compression none: exit %d", code)
	}
	size := map[string]int64{}
	for _, c := range []string{"none", "snappy", "zstd"} {
		dst := filepath.Join(tmp, c)
		out, errOut, code := runCLI(t, "--json", "rewrite", src, "--buckets", "16", "--out", dst, "--compression", c)
		if code != exitOK {
			t.Fatalf("--compression %s: exit %d: %s%s", c, code, out, errOut)
		}
		var rep struct {
			Rewrite struct {
				Compression string `json:"compression"`
				TargetBytes int64  `json:"target_bytes"`
			} `json:"rewrite"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if rep.Rewrite.Compression != c {
			t.Fatalf("--compression %s: summary says %q", c, rep.Rewrite.Compression)
		}
		size[c] = rep.Rewrite.TargetBytes
	}
	if !(size["zstd"] < size["snappy"] && size["snappy"] < size["none"]) {
		t.Fatalf("target bytes by compression: %v", size)
	}
	for _, args := range [][]string{
		{"rewrite", src, "--buckets", "16", "--out", filepath.Join(tmp, "bad"), "--compression", "lz4"},
		{"generate", "--out", filepath.Join(tmp, "bad2"), "--compression", "gzip"},
	} {
		if _, _, code := runCLI(t, args...); code != exitUsage {
			t.Fatalf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// A temporary directory of the target that no dead run's marker claims
// (here: the old target an interrupted --force could leave) is named to
// the operator and left alone.
func TestRewriteNamesLeftoverTempDir(t *testing.T) {
	tmp := t.TempDir()
	src := genRewriteSource(t, tmp, 100)
	dst := filepath.Join(tmp, "dst")
	left := filepath.Join(tmp, ".dst.rebucket-tmp-0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(left, "data"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "MANIFEST.json"), []byte("{}"), 0o640); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "rewrite", src, "--buckets", "16", "--out", dst)
	if code != exitOK || !strings.Contains(out, "left alone: "+left) {
		t.Fatalf("exit %d, leftover not named:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(left, "MANIFEST.json")); err != nil {
		t.Fatalf("the leftover was touched: %v", err)
	}
}
