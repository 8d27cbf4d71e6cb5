package graph

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"herald/store"
)

func opOf(kind ast.Operation) *graphql.OperationContext {
	return &graphql.OperationContext{Operation: &ast.OperationDefinition{Operation: kind}}
}

// The tables of buckets are bounded: past MaxKeys, the least recently used
// key is forgotten (and comes back with a full bucket), while a key in use
// keeps its state. Users and addresses have separate tables, so addresses
// cycling through the table cannot push users out.
func TestRateLimiter_Bounded(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewRateLimiter(RateLimits{
		User:    Rate{Count: 1, Per: time.Hour, Burst: 1},
		Address: Rate{Count: 1, Per: time.Hour, Burst: 1},
		MaxKeys: 2,
		Now:     func() time.Time { return now },
	})
	// allowed reports whether a mutation from addr passes.
	allowed := func(addr string) bool {
		ctx := NewContextWithClientAddr(context.Background(), netip.MustParseAddr(addr))
		return l.MutateOperationContext(ctx, opOf(ast.Mutation)) == nil
	}
	viewer := store.NewID(now)
	require.Nil(t, l.MutateOperationContext(NewContextWithSession(context.Background(), store.Session{UserID: viewer}), opOf(ast.Mutation)))

	require.True(t, allowed("192.0.2.1"))
	require.True(t, allowed("192.0.2.2"))
	require.False(t, allowed("192.0.2.1"), "bucket empty; .1 is now the most recently used")
	require.True(t, allowed("192.0.2.3"), "a third address pushes out .2, the least recently used")
	assert.Equal(t, 2, l.addrs.cache.Len())
	assert.False(t, allowed("192.0.2.1"), "a key in use keeps its state")
	assert.True(t, allowed("192.0.2.2"), "a forgotten key comes back with a full bucket")
	assert.Equal(t, 2, l.addrs.cache.Len())

	for i := range 100 {
		allowed(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}).String())
	}
	assert.Equal(t, 2, l.addrs.cache.Len(), "capacity respected")
	assert.Equal(t, 1, l.users.cache.Len())
	assert.NotNil(t, l.MutateOperationContext(NewContextWithSession(context.Background(), store.Session{UserID: viewer}), opOf(ast.Mutation)),
		"the user's bucket was not pushed out by addresses")
}

// Queries and subscriptions take no token and create no bucket; nor does
// an operation without a user or an address.
func TestRateLimiter_OnlyMutations(t *testing.T) {
	l := NewRateLimiter(RateLimits{
		User:    Rate{Count: 1, Per: time.Hour, Burst: 1},
		Address: Rate{Count: 1, Per: time.Hour, Burst: 1},
	})
	ctx := NewContextWithSession(NewContextWithClientAddr(context.Background(), netip.MustParseAddr("192.0.2.1")), store.Session{UserID: store.NewID(time.Now())})
	for range 3 {
		assert.Nil(t, l.MutateOperationContext(ctx, opOf(ast.Query)))
		assert.Nil(t, l.MutateOperationContext(ctx, opOf(ast.Subscription)))
		assert.Nil(t, l.MutateOperationContext(context.Background(), opOf(ast.Mutation)))
	}
	assert.Zero(t, l.addrs.cache.Len())
	assert.Zero(t, l.users.cache.Len())
	assert.Nil(t, l.MutateOperationContext(ctx, opOf(ast.Mutation)))
	err := l.MutateOperationContext(ctx, opOf(ast.Mutation))
	require.NotNil(t, err)
	assert.Equal(t, CodeRateLimited, err.Extensions["code"])
	assert.Equal(t, 3600, err.Extensions["retryAfter"])
}
