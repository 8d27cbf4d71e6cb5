package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
)

// TestLanes_OneProcessHoldsEveryLane checks that a lone Service on MongoDB
// started with four lanes stores that number and, the only live process,
// takes all four owner lanes at start.
func TestLanes_OneProcessHoldsEveryLane(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: 4, LeaseTTL: time.Hour, JobPoll: time.Hour})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	lanes := svc.Stats().Lanes
	require.Len(t, lanes, 4)
	for i, l := range lanes {
		assert.True(t, l.Held, "lane %d", i)
	}
	n, err := st.FanoutLanes(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "the first process stores its number; a later one uses it")
}
