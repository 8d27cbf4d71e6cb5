// Command herald is the Herald GraphQL social API server: one binary that
// serves GraphQL over HTTP and websocket on an embedded store, or, with
// -mongodb-uri, on MongoDB shared by any number of instances (`herald mongo
// setup` prepares its indexes, shard keys and zones).
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
