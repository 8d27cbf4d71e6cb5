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

// TestLanes_SharedBackendRunsOne checks that a Service on MongoDB runs one
// fan-out lane whatever Options.Lanes says: its count-step markers hold
// one job per inbox, which lanes writing one inbox at once would break
// (docs/design.md#scaling-fan-out-across-processes).
func TestLanes_SharedBackendRunsOne(t *testing.T) {
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
	require.Len(t, lanes, 1)
	assert.True(t, lanes[0].Held, "the only process takes the lease at start")
}
