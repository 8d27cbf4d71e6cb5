package graph

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoundEventFields checks that a subscription event's fields share one
// deadline, set when the first of them starts, that the end of the
// event's response releases, and that fields outside an event are left
// unbounded.
func TestBoundEventFields(t *testing.T) {
	deadlineOf := func(ctx context.Context) (ctx2 context.Context, at time.Time, ok bool) {
		_, _ = boundEventFields(ctx, func(c context.Context) (any, error) {
			ctx2 = c
			at, ok = c.Deadline()
			return nil, nil
		})
		return ctx2, at, ok
	}

	_, _, ok := deadlineOf(context.Background())
	assert.False(t, ok, "a field outside a subscription event is not bounded")

	const timeout = time.Minute
	ctx, d := withEventDeadline(context.Background(), timeout)
	_, ok = ctx.Deadline()
	assert.False(t, ok, "the wait for an event is not bounded")

	start := time.Now()
	first, at, ok := deadlineOf(ctx)
	require.True(t, ok, "an event's field is bounded")
	assert.WithinDuration(t, start.Add(timeout), at, time.Second)
	second, at2, ok := deadlineOf(ctx)
	require.True(t, ok)
	assert.Equal(t, at, at2, "an event's fields share its deadline")

	_, at3, _ := deadlineOf(first)
	assert.Equal(t, at, at3, "a field under a bounded one keeps its deadline")

	require.NoError(t, first.Err())
	d.release()
	assert.ErrorIs(t, first.Err(), context.Canceled, "the event's end releases its fields' timers")
	assert.ErrorIs(t, second.Err(), context.Canceled)
}
