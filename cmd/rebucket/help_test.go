package main

import (
	"fmt"
	"github.com/rebucket/rebucket/plan"
	"os"
	"path/filepath"

	"github.com/rebucket/rebucket/fixtures"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every command's --help has an Examples section, and every enum flag
// completes its values, each of which the flag's own help names.
func TestEveryCommandHasExamplesAndEnumCompletion(t *testing.T) {
	root := newRootCommand()
	enums := 0
	for _, c := range root.Commands() {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Examples in --help", c.Name())
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			// Each example is a command line this binary accepts.
			line, _, _ = strings.Cut(line, " #")
			args := strings.Fields(line)
			if len(args) < 2 || args[0] != "rebucket" {
				t.Errorf("%s: example line is not a command: %q", c.Name(), line)
				continue
			}
			sub, rest, err := newRootCommand().Find(args[1:])
			if err != nil || sub.Name() != args[1] {
				t.Errorf("%s: example %q: no such command (%v)", c.Name(), line, err)
				continue
			}
			if err := sub.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", c.Name(), line, err)
			}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			want, ok := enumValues(c, f.Name)
			if !ok {
				return
			}
			enums++
			fn, ok := c.GetFlagCompletionFunc(f.Name)
			if !ok {
				t.Errorf("%s --%s: no value completion", c.Name(), f.Name)
				return
			}
			got, dir := fn(c, nil, "")
			if len(got) != len(want) || dir != cobra.ShellCompDirectiveNoFileComp {
				t.Errorf("%s --%s completes %v (directive %d), want %v", c.Name(), f.Name, got, dir, want)
			}
			for _, v := range got {
				if !strings.Contains(f.Usage, v) {
					t.Errorf("%s --%s completes %q, which its help does not name: %q", c.Name(), f.Name, v, f.Usage)
				}
			}
			if len(want) > 0 {
				if part, _ := fn(c, nil, want[0][:1]); len(part) == 0 || part[0] != want[0] {
					t.Errorf("%s --%s: completing %q gives %v", c.Name(), f.Name, want[0][:1], part)
				}
			}
		})
	}
	if enums < 10 {
		t.Errorf("only %d enum flags found: the walk missed commands", enums)
	}
}

// The help text shows the examples.
func TestHelpShowsExamples(t *testing.T) {
	out, _, code := runCLI(t, "rewrite", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "rebucket rewrite snap --buckets 160 --out snap-160") {
		t.Errorf("rewrite --help (exit %d) has no examples:\n%s", code, out)
	}
}

// One rule: for 40 workers on the story's 8-bucket snapshot, plan
// --recommend, plan --widths, verify --width and load's refusal name the
// same count, as commands on the user's own paths.
func TestAdviceAgreesFor40Workers(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 8, Width: 4, Keys: 100})
	into := filepath.Join(t.TempDir(), "stores")
	rewrite := "`rebucket rewrite " + dir + " --buckets 160 --out " + dir + "-160`"
	for _, tc := range []struct {
		args []string
		want []string
		code int
	}{
		{[]string{"plan", "--recommend", "--peak-width", "40"}, []string{"): 160\n"}, exitOK},
		{[]string{"plan", dir, "--recommend", "--peak-width", "40"}, []string{"): 160\n"}, exitOK},
		{[]string{"plan", dir, "--widths", "40"}, []string{rewrite}, exitOK},
		{[]string{"verify", dir, "--width", "40"}, []string{rewrite, "then `rebucket verify " + dir + "-160 --width 40`"}, exitFindings},
		{[]string{"load", dir, "--width", "40", "--into", into}, []string{rewrite, "then `rebucket load " + dir + "-160 --width 40 --into " + into + "`", "--into " + into + " --on-excess cap"}, exitRefused},
	} {
		out, errOut, code := runCLI(t, tc.args...)
		all := out + errOut
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, all)
		}
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, all)
			}
		}
		for _, bad := range []string{"SNAPSHOT --", "--out NEW", "--buckets 40 "} {
			if strings.Contains(all, bad) {
				t.Errorf("%v: output has %q:\n%s", tc.args, bad, all)
			}
		}
	}
}

// The README story and scripts/demo.sh rewrite to the count the rule names
// for 40 workers over 8 buckets.
func TestStoryAndDemoFollowTheRule(t *testing.T) {
	want := fmt.Sprintf("--buckets %d ", plan.SuggestBuckets(8, 40))
	for _, f := range []string{"../../README.md", "../../scripts/demo.sh"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "rewrite ") && strings.Contains(line, "--buckets ") && (strings.Contains(line, "rewrite snap") || strings.Contains(line, "rewrite examples/sample")) {
				n++
				if !strings.Contains(line, want) {
					t.Errorf("%s: %q does not rewrite with %q", f, line, want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no rewrite of the story found", f)
		}
	}
}

// verify says --parallelism like every other command; --parallel, its old
// name, still works but is hidden from --help.
func TestVerifyParallelism(t *testing.T) {
	dir := genPlanFixture(t, fixtures.Spec{Buckets: 4, Width: 2, Keys: 50})
	for _, flag := range []string{"--parallelism", "--parallel"} {
		if out, errOut, code := runCLI(t, "verify", dir, flag, "2"); code != exitOK {
			t.Errorf("%s: exit %d\n%s%s", flag, code, out, errOut)
		}
	}
	out, _, _ := runCLI(t, "verify", "--help")
	if !strings.Contains(out, "--parallelism") || strings.Contains(out, "--parallel ") {
		t.Errorf("verify --help:\n%s", out)
	}
	_, errOut, code := runCLI(t, "verify", dir, "--against", dir, "--deep")
	if code != exitUsage || !strings.Contains(errOut, "rebucket verify "+dir+" --deep") {
		t.Errorf("--deep --against: exit %d: %s", code, errOut)
	}
}

// The README's Commands table and the commands agree: every command row
// names a command, and every flag it shows exists on that command.
func TestReadmeCommandsTableMatchesFlags(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	rows := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		usage, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "` |")
		fields := strings.Fields(usage)
		if len(fields) == 0 {
			continue
		}
		c, _, err := root.Find(fields[:1])
		if err != nil || c == root {
			continue // not a command row (the exit code table)
		}
		rows++
		for _, f := range fields {
			f = strings.Trim(f, "[]|")
			if !strings.HasPrefix(f, "--") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			name = strings.TrimRight(name, "]")
			if c.Flags().Lookup(name) == nil && root.PersistentFlags().Lookup(name) == nil {
				t.Errorf("README row %q: %s has no flag --%s", fields[0], c.Name(), name)
			}
		}
	}
	if rows < len(root.Commands())-1 {
		t.Errorf("only %d command rows in the README's table", rows)
	}
}
