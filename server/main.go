// Command herald is the Herald GraphQL social API server: one binary that
// serves GraphQL over HTTP and websocket on an embedded store.
//
// Configuration comes from flags, each with a HERALD_* environment fallback
// (run herald -h). SIGINT or SIGTERM starts a graceful shutdown.
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
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}
