package loader_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/graph/loader"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// BenchmarkLoaders measures what one timeline page asks of the loaders:
// a preload of its 50 messages, their 10 authors and whether the viewer
// follows them, then a load of each, as the resolvers make them. It
// reports the batch reads per page beside time and allocations.
//
//	go test -run '^$' -bench Loaders -benchmem ./graph/loader/
func BenchmarkLoaders(b *testing.B) {
	ctx := context.Background()
	st, err := embedded.Open(b.TempDir(), embedded.Options{CacheBytes: 8 << 20})
	require.NoError(b, err)
	be := &backend{Backend: st}
	svc := service.NewService(be, pubsub.NewHub(), service.Options{PasswordCost: bcrypt.MinCost})
	require.NoError(b, svc.Start(ctx))
	b.Cleanup(func() {
		require.NoError(b, svc.Close(ctx))
		require.NoError(b, st.Close())
	})
	viewer, err := svc.SignUp(ctx, service.SignUpInput{Handle: "viewer", Password: "password1"})
	require.NoError(b, err)
	var authors []store.ID
	var keys []store.MessageKey
	for i := range 10 {
		u, err := svc.SignUp(ctx, service.SignUpInput{Handle: fmt.Sprintf("author%d", i), Password: "password1"})
		require.NoError(b, err)
		authors = append(authors, u.ID)
		for j := range 5 {
			m, err := svc.PostMessage(ctx, u.ID, service.PostInput{Text: fmt.Sprintf("message %d of author %d", j, i)})
			require.NoError(b, err)
			keys = append(keys, m.Key())
		}
	}
	pageAuthors := make([]store.ID, len(keys))
	for i, k := range keys {
		pageAuthors[i] = k.AuthorID
	}
	be.users.Store(0)
	be.messages.Store(0)
	be.following.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l := loader.New(svc, viewer.ID, true)
		lctx := loader.NewContext(ctx, l)
		l.Preload(lctx, loader.Preloads{Users: pageAuthors, Messages: keys, Follows: authors})
		msgs, errs := l.Messages(lctx, keys)
		for i, m := range msgs {
			if errs[i] != nil || m == nil {
				b.Fatalf("message %d: %v", i, errs[i])
			}
			if _, err := l.User(lctx, m.AuthorID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	calls := be.users.Load() + be.messages.Load() + be.following.Load()
	b.ReportMetric(float64(calls)/float64(b.N), "batch-reads/op")
}
