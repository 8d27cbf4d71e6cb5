package service

import (
	"context"
	"sync/atomic"
)

// passwords bounds the password hashing a process does at once. bcrypt
// costs ~50–100 ms of a core at its default cost, by design; unbounded, a
// burst of logIns or signUps from many addresses would hold every core.
// Each check waits for a slot under its request's context, so a request
// whose client left, or whose time ran out, stops waiting and never
// hashes.
type passwords struct {
	slots   chan struct{}
	waiting atomic.Int64
	checks  atomic.Uint64
}

func newPasswords(n int) *passwords {
	return &passwords{slots: make(chan struct{}, max(n, 1))}
}

// do runs fn, a hash or a comparison, once a slot is free, unless ctx ends
// first: then it returns ctx's error and fn does not run.
func (p *passwords) do(ctx context.Context, fn func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.waiting.Add(1)
	select {
	case p.slots <- struct{}{}:
		p.waiting.Add(-1)
	case <-ctx.Done():
		p.waiting.Add(-1)
		return ctx.Err()
	}
	defer func() { <-p.slots }()
	// The slot may have come as the context ended.
	if err := ctx.Err(); err != nil {
		return err
	}
	p.checks.Add(1)
	fn()
	return nil
}
