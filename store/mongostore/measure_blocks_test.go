package mongostore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
)

// TestRoundTrips_Blocks measures the MongoDB round trips of blocks and
// mutes as the service makes them, jobs included, and what the hidden set
// costs a home page read by fan-out on read.
func TestRoundTrips_Blocks(t *testing.T) {
	for _, st := range []service.Strategy{service.StrategyBucket, service.StrategyRead} {
		t.Run(string(st), func(t *testing.T) {
			ctx := context.Background()
			client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
			require.NoError(t, err)
			defer engine.Close()
			var n, docs atomic.Int64
			b := mongostore.New(countingClient{client, &n, &docs}, "herald", mongostore.Options{})
			require.NoError(t, b.EnsureIndexes(ctx))
			svc := service.NewService(b, pubsub.NewHub(), service.Options{Strategy: st, PasswordCost: bcrypt.MinCost, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, svc.Start(ctx))
			t.Cleanup(func() { _ = svc.Close(ctx) })
			users := make(map[string]store.ID)
			for _, h := range []string{"reader", "ann", "bo", "cy"} {
				u, err := svc.SignUp(ctx, service.SignUpInput{Handle: "user_" + h, Password: "password123"})
				require.NoError(t, err)
				users[h] = u.ID
			}
			for _, f := range [][2]string{{"reader", "ann"}, {"reader", "bo"}, {"ann", "reader"}} {
				_, err := svc.Follow(ctx, users[f[0]], users[f[1]])
				require.NoError(t, err)
			}
			for i := range 4 {
				for _, h := range []string{"ann", "bo"} {
					_, err := svc.PostMessage(ctx, users[h], service.PostInput{Text: fmt.Sprint(h, i)})
					require.NoError(t, err)
				}
			}
			idle := func() { require.Eventually(t, svc.Idle, 10e9, 5e6) }
			idle()
			page := func() int64 {
				n.Store(0)
				p, err := svc.Inbox(ctx, users["reader"], store.Forward(store.NilID, 3))
				require.NoError(t, err)
				require.Len(t, p.Items, 3)
				return n.Load()
			}
			plain := page()
			for _, op := range []struct {
				what string
				do   func(context.Context, store.ID, store.ID) (*store.User, error)
				a, b string
			}{
				{"mute a followee", svc.Mute, "reader", "bo"},
				{"mute again", svc.Mute, "reader", "bo"},
				{"block a user who follows and is followed", svc.Block, "reader", "ann"},
				{"block again", svc.Block, "reader", "ann"},
				{"unmute", svc.Unmute, "reader", "bo"},
				{"unblock", svc.Unblock, "reader", "ann"},
				{"block a stranger", svc.Block, "bo", "cy"},
			} {
				n.Store(0)
				_, err := op.do(ctx, users[op.a], users[op.b])
				require.NoError(t, err)
				idle()
				t.Logf("%s: %d round trips, jobs included", op.what, n.Load())
			}
			_, err = svc.Mute(ctx, users["reader"], users["cy"])
			require.NoError(t, err)
			idle()
			filtered := page()
			t.Logf("a home page of 3: %d round trips with no relation, %d with relations", plain, filtered)
			n.Store(0)
			_, err = b.ListBlockers(ctx, users["reader"], 1000)
			require.NoError(t, err)
			assert.Equal(t, int64(1), n.Load(), "who blocks a reader: one query")
		})
	}
}
