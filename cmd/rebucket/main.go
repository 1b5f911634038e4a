// Command rebucket rewrites, checks, exports and loads the durable keyed
// snapshots of stateful streaming jobs. See the README for the commands and
// exitcode.go for the exit codes.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	err := root.ExecuteContext(ctx)
	code := exitCode(ctx, err)
	if err != nil {
		if _, quiet := err.(silentError); !quiet {
			fmt.Fprintf(os.Stderr, "rebucket: %v\n", err)
		}
	}
	stop()
	os.Exit(code)
}
