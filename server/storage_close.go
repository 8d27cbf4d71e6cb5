package main

import (
	"context"
	"fmt"
)

// closeWithin runs close and returns its error, or gives up when ctx ends:
// a store whose close hangs (a stalled disk) must not keep the process from
// exiting at the shutdown deadline. Not waiting loses nothing: every
// acknowledged write is already durable, and the close goes on until the
// process exits.
func closeWithin(ctx context.Context, close func() error) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
		}
		return fmt.Errorf("the store did not close before the shutdown deadline (%w); exiting without waiting for it, acknowledged writes being already durable", ctx.Err())
	}
}
