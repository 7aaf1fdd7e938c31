// Command veer is the single binary of the veer toolkit. Each part is a
// subcommand; run "veer --help" for the list.
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
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "veer:", err)
		os.Exit(1)
	}
}
