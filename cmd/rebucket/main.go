// Command rebucket rewrites, checks, exports and loads the durable keyed
// snapshots of stateful streaming jobs. See the README for the commands and
// exitcode.go for the exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code; main and the
// tests share it, so the tests see exactly what a user sees.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	started := markStarted(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && !*started && !strings.Contains(err.Error(), "--help' for usage") {
		// cobra refused the command line before any command ran: an
		// unknown command, a missing required flag, a bad argument count.
		err = usagef(fmt.Errorf("%w\nRun 'rebucket --help' for usage.", err))
	}
	if err != nil && !*started {
		err = usagef(err)
	}
	code := exitCode(ctx, err)
	var silent silentError
	if err != nil && !errors.As(err, &silent) {
		reportError(root, stderr, code, err)
	}
	return code
}

// markStarted wraps every command's RunE so that run can tell an error of
// the command line (returned before any RunE started) from one of the work.
func markStarted(root *cobra.Command) *bool {
	started := new(bool)
	var wrap func(c *cobra.Command)
	wrap = func(c *cobra.Command) {
		if f := c.RunE; f != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				*started = true
				// Human reports fit in 80 columns; JSON is left alone.
				if asJSON, _ := cmd.Flags().GetBool("json"); !asJSON {
					ww := newWrapWriter(cmd.OutOrStdout())
					cmd.SetOut(ww)
					defer ww.Flush()
				}
				return f(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
	return started
}

// errorReport is what --json prints for an error: one object on stderr.
type errorReport struct {
	Type     string `json:"type"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
	Hint     string `json:"hint"`
}

// reportError prints the error of a run, as one line of text or, under
// --json, as one JSON object.
func reportError(root *cobra.Command, stderr io.Writer, code int, err error) {
	msg := err.Error()
	if code == exitInterrupted {
		msg = "interrupted; temporary and spill files removed, no target left"
	}
	if asJSON, _ := root.PersistentFlags().GetBool("json"); asJSON {
		_ = writeJSONLine(stderr, errorReport{Type: "error", ExitCode: code, Message: msg, Hint: exitHint(code)})
		return
	}
	fmt.Fprintln(stderr, foldLine(singular("rebucket: "+msg), foldWidth(stderr)))
}
