package main

import (
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
