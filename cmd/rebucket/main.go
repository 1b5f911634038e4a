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
	"syscall"
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
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var silent silentError
	if err != nil && !errors.As(err, &silent) {
		fmt.Fprintf(stderr, "rebucket: %v\n", err)
	}
	return exitCode(ctx, err)
}
