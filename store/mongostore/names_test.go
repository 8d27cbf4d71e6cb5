package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"

	"herald/store"
	"herald/store/mongostore"
)

// TestNameStore_ManyProcesses registers the same and different attribute
// names from several stores at once — each with its own token cache, as
// separate Herald processes would have — and checks the name-store
// documents: every name once, in documents of at most 100 names whose
// least values follow each other.
func TestNameStore_ManyProcesses(t *testing.T) {
	ctx := context.Background()
	_, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	const procs, shared, own = 4, 60, 30 // 60 + 4×30 = 180 names: two documents
	stores := make([]*mongostore.Store, procs)
	users := make([]store.ID, procs)
	for i := range stores {
		stores[i] = mongostore.New(lungo.NewClient(engine), "herald", mongostore.Options{})
		require.NoError(t, stores[i].EnsureIndexes(ctx))
		now := time.Now().UTC().Truncate(time.Millisecond)
		users[i] = store.NewID(now)
		require.NoError(t, stores[i].CreateUser(ctx, &store.User{ID: users[i], Handle: fmt.Sprintf("p%d", i), CreatedAt: now, LastSeenAt: now}))
	}
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			for i := range shared + own {
				name := fmt.Sprintf("shared$%d", (i*7+p)%shared)
				if i >= shared {
					name = fmt.Sprintf("own.%d.%d", p, i)
				}
				v := fmt.Sprint(p)
				_, err := stores[p].SetAttributes(ctx, users[p], []store.AttributeChange{{Name: name, Value: &v}})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()

	cur, err := stores[0].Database().Collection("names").Find(ctx, bson.D{})
	require.NoError(t, err)
	var docs []struct {
		Least int32    `bson:"_id"`
		Names []string `bson:"l"`
	}
	require.NoError(t, cur.All(ctx, &docs))
	seen := map[string]bool{}
	for i, d := range docs {
		assert.Equal(t, int32(100*i), d.Least, "least values follow each other")
		assert.LessOrEqual(t, len(d.Names), 100)
		for _, n := range d.Names {
			assert.False(t, seen[n], "name %q registered twice", n)
			seen[n] = true
		}
	}
	assert.Len(t, seen, shared+procs*own)
	assert.Len(t, docs, 2, "the names overflowed into a second document")

	// A fresh process (empty cache) reads every user's attributes back by name.
	fresh := mongostore.New(lungo.NewClient(engine), "herald", mongostore.Options{})
	for p, id := range users {
		u, err := fresh.FindUserByID(ctx, id)
		require.NoError(t, err)
		require.Len(t, u.Attributes, shared+own)
		for _, a := range u.Attributes {
			assert.Equal(t, fmt.Sprint(p), a.Value)
		}
	}
}
