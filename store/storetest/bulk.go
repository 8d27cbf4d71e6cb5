package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/seed"
	"herald/store/service"
	"herald/store/storage"
)

// noProgress hides a loader's progress, so that a load writes every
// batch again.
type noProgress struct{ storage.BulkLoader }

func (noProgress) BulkProgress(context.Context, string) ([]byte, error) { return nil, nil }

// testBulk loads a generated network under each strategy, twice, and
// requires every reader's timeline and counts to be what fan-out on read
// computes over the same users, edges and messages, before and after the
// live writes that must work on loaded data: a post fanned out to loaded
// followers, the deletion of a loaded message, an unfollow.
func testBulk(t *testing.T, open OpenFunc) {
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			b := openBackend(t, open)
			bl, ok := b.(storage.BulkLoader)
			require.True(t, ok, "the backend loads in bulk")
			c := newClock()
			c.ms.Store(seed.Epoch.Add(60 * 24 * time.Hour).UnixMilli())
			n, err := seed.Generate(seed.Config{
				Seed: 11, Users: 40, AvgFollows: 6, Messages: 300, Pinned: []int{30},
				Strategy: st, CelebrityThreshold: 20,
			})
			require.NoError(t, err)
			opts := seed.LoadOptions{PasswordHash: []byte("x"), LastSeen: c.Now(), BatchRecords: 97}
			_, err = seed.Load(ctx, bl, n, opts)
			require.NoError(t, err)
			// A repeat of every batch changes nothing.
			_, err = seed.Load(ctx, noProgress{bl}, n, opts)
			require.NoError(t, err)

			svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st, CelebrityThreshold: 20})
			ref, _ := newServiceStopped(t, b, c, service.Options{Strategy: service.StrategyRead})
			owners := make([]store.ID, n.Users())
			for i := range owners {
				owners[i] = n.UserID(i)
			}
			sameAsRead := func(t *testing.T, when string) {
				t.Helper()
				for i, owner := range owners {
					want := timeline{Texts: inboxTexts(t, ref, owner, 50)}
					wc, err := ref.InboxCounts(ctx, owner)
					require.NoError(t, err)
					want.Total, want.Unread = wc.Total, wc.Unread
					got := timeline{Texts: inboxTexts(t, svc, owner, 50)}
					gc, err := svc.InboxCounts(ctx, owner)
					require.NoError(t, err)
					got.Total, got.Unread = gc.Total, gc.Unread
					require.Equal(t, want, got, "%s: user %d", when, i)
				}
			}

			big := n.Pinned(0)
			followers, err := b.ListFollowers(ctx, owners[big], store.Forward(store.NilID, 100))
			require.NoError(t, err)
			assert.Len(t, followers, 30)
			u, err := b.FindUserByHandle(ctx, seed.Handle(big))
			require.NoError(t, err)
			assert.Equal(t, 30, u.FollowerCount)
			assert.Equal(t, len(n.Following(big)), u.FollowingCount)
			first := n.FollowersOf(big)[0]
			loaded := inboxTexts(t, svc, owners[first], 50)
			require.Len(t, loaded, n.TimelineSize(int(first)))
			sameAsRead(t, "loaded")

			// A post by the most followed author reaches every follower.
			m, err := svc.PostMessage(ctx, owners[big], service.PostInput{Text: "after the load"})
			require.NoError(t, err)
			waitIdle(t, svc)
			assert.Equal(t, "after the load", inboxTexts(t, svc, owners[first], 50)[0])
			sameAsRead(t, "after a post")

			// The deletion of a loaded message leaves every inbox.
			page, err := svc.Inbox(ctx, owners[first], store.Forward(store.NilID, 3))
			require.NoError(t, err)
			gone := page.Items[2].Message
			require.NoError(t, svc.DeleteMessage(ctx, gone.AuthorID, gone.ID))
			waitIdle(t, svc)
			assert.NotContains(t, inboxTexts(t, svc, owners[first], 50), gone.Text)
			sameAsRead(t, "after a deletion")

			// An unfollow takes the author's loaded entries away.
			_, err = svc.Unfollow(ctx, owners[first], owners[big])
			require.NoError(t, err)
			waitIdle(t, svc)
			assert.NotContains(t, inboxTexts(t, svc, owners[first], 50), m.Text)
			sameAsRead(t, "after an unfollow")
		})
	}
}
