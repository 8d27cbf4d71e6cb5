package storetest

import (
	"context"
	"slices"
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
// followers, the deletion of a loaded message, an unfollow. The likes
// the Service shows are the network's, before and after a like and an
// unlike of loaded ones; the reposts are stored as CreateMessage stores
// them (sameReposts).
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
			model := likesOf(n)
			require.NotEmpty(t, model.byUser, "the network has likes")
			sameLikes(t, svc, n, model, "loaded")
			sameReposts(t, b, n)
			require.Len(t, loaded, n.TimelineSize(int(first)))
			for i, owner := range owners {
				c, err := svc.InboxCounts(ctx, owner)
				require.NoError(t, err)
				require.Equal(t, n.InboxTotal(i), c.Total, "user %d's inbox total", i)
				require.Len(t, inboxTexts(t, svc, owner, 50), n.TimelineSize(i), "user %d's timeline", i)
			}
			sameAsRead(t, "loaded")

			// A like of a loaded message counts on from its loaded likes, and
			// the unlike of a loaded like finds it.
			liked := model.byUser[owners[first]]
			require.NotEmpty(t, liked, "user %d likes something", first)
			undo := liked[0]
			was, err := svc.Unlike(ctx, undo.UserID, undo.MessageID)
			require.NoError(t, err)
			model.remove(undo)
			assert.Equal(t, len(model.byMessage[undo.MessageID]), was.LikeCount)
			fresh := model.toLike(t, n, owners[first])
			got, err := svc.Like(ctx, owners[first], fresh.MessageID)
			require.NoError(t, err)
			assert.Equal(t, len(model.byMessage[fresh.MessageID])+1, got.LikeCount)
			page, err := svc.Likes(ctx, owners[first], owners[first], store.Forward(store.NilID, 1))
			require.NoError(t, err)
			require.Len(t, page.Likes, 1)
			model.add(page.Likes[0])
			assert.Equal(t, fresh.MessageID, page.Likes[0].MessageID, "the new like is the newest")
			sameLikes(t, svc, n, model, "after an unlike and a like")

			// A post by the most followed author reaches every follower.
			m, err := svc.PostMessage(ctx, owners[big], service.PostInput{Text: "after the load"})
			require.NoError(t, err)
			waitIdle(t, svc)
			assert.Equal(t, "after the load", inboxTexts(t, svc, owners[first], 50)[0])
			sameAsRead(t, "after a post")

			// The deletion of a loaded message leaves every inbox.
			inbox, err := svc.Inbox(ctx, owners[first], store.Forward(store.NilID, 3))
			require.NoError(t, err)
			gone := inbox.Items[2].Message
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

// likeModel is what a network's likes should show: each message's and
// each user's, newest first.
type likeModel struct {
	byMessage, byUser map[store.ID][]store.Like
}

// likesOf returns the model of n's likes.
func likesOf(n *seed.Network) *likeModel {
	m := &likeModel{byMessage: map[store.ID][]store.Like{}, byUser: map[store.ID][]store.Like{}}
	for k := range n.Config().Messages {
		for _, l := range n.MessageLikes(k) {
			m.add(l)
		}
	}
	return m
}

func newestFirst(a, b store.Like) int { return b.ID.Compare(a.ID) }

func (m *likeModel) add(l store.Like) {
	m.byMessage[l.MessageID] = append(m.byMessage[l.MessageID], l)
	slices.SortFunc(m.byMessage[l.MessageID], newestFirst)
	m.byUser[l.UserID] = append(m.byUser[l.UserID], l)
	slices.SortFunc(m.byUser[l.UserID], newestFirst)
}

func (m *likeModel) remove(l store.Like) {
	same := func(x store.Like) bool { return x.ID == l.ID }
	m.byMessage[l.MessageID] = slices.DeleteFunc(m.byMessage[l.MessageID], same)
	m.byUser[l.UserID] = slices.DeleteFunc(m.byUser[l.UserID], same)
}

// toLike returns a like of a message of n that user does not like and
// did not write, for user to like.
func (m *likeModel) toLike(t *testing.T, n *seed.Network, user store.ID) store.Like {
	t.Helper()
	for k := range n.Config().Messages {
		for _, l := range n.MessageLikes(k) {
			mine := slices.ContainsFunc(m.byUser[user], func(x store.Like) bool { return x.MessageID == l.MessageID })
			if l.AuthorID != user && !mine {
				return l
			}
		}
	}
	t.Fatal("no message left to like")
	return store.Like{}
}

// sameLikes requires the Service to show m: every message's like count
// and likers, every user's likes and, for every message, whether each
// user likes it.
func sameLikes(t *testing.T, svc *service.Service, n *seed.Network, m *likeModel, when string) {
	t.Helper()
	var keys []store.MessageKey
	wantCounts, gotCounts := map[store.ID]int{}, map[store.ID]int{}
	wantLikers, gotLikers := map[store.ID][]store.Like{}, map[store.ID][]store.Like{}
	for i := range n.Users() {
		page, err := svc.Messages(ctx, n.UserID(i), store.Forward(store.NilID, 1000))
		require.NoError(t, err)
		for _, msg := range page.Messages {
			keys = append(keys, msg.Key())
			wantCounts[msg.ID], gotCounts[msg.ID] = len(m.byMessage[msg.ID]), msg.LikeCount
			likers, err := svc.Likers(ctx, msg.ID, store.Forward(store.NilID, 1000))
			require.NoError(t, err)
			wantLikers[msg.ID], gotLikers[msg.ID] = nilIfEmpty(m.byMessage[msg.ID]), nilIfEmpty(likers.Likes)
		}
	}
	require.Len(t, keys, n.Config().Messages+n.Reposts(), "%s: the network's messages and reposts", when)
	assert.Equal(t, wantCounts, gotCounts, "%s: like counts", when)
	assert.Equal(t, wantLikers, gotLikers, "%s: likers", when)
	wantLikes, gotLikes := map[int][]store.Like{}, map[int][]store.Like{}
	wantLiked, gotLiked := map[int][]bool{}, map[int][]bool{}
	for i := range n.Users() {
		u := n.UserID(i)
		likes, err := svc.Likes(ctx, u, u, store.Forward(store.NilID, 1000))
		require.NoError(t, err)
		wantLikes[i], gotLikes[i] = nilIfEmpty(m.byUser[u]), nilIfEmpty(likes.Likes)
		liked, err := svc.FindLiked(ctx, u, keys)
		require.NoError(t, err)
		gotLiked[i] = liked
		wantLiked[i] = make([]bool, len(keys))
		for j, k := range keys {
			wantLiked[i][j] = slices.ContainsFunc(m.byUser[u], func(l store.Like) bool { return l.MessageID == k.ID })
		}
	}
	assert.Equal(t, wantLikes, gotLikes, "%s: each user's likes", when)
	assert.Equal(t, wantLiked, gotLiked, "%s: what each user likes", when)
}

// sameReposts requires b to hold n's reposts as CreateMessage stores them:
// each in its reposter's outbox (naming its original) and message count,
// each original's RepostCount the reposts stored of it, FindReposts
// finding each, and a second repost of a reposted message refused as
// CONFLICT, changing nothing.
func sameReposts(t *testing.T, b storage.Backend, n *seed.Network) {
	t.Helper()
	require.NotZero(t, n.Reposts(), "the network has reposts")
	stored := map[store.ID][]*store.Message{} // by original
	for i := range n.Users() {
		msgs, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: n.UserID(i), Range: store.Forward(store.NilID, 1000)})
		require.NoError(t, err)
		u, err := b.FindUserByID(ctx, n.UserID(i))
		require.NoError(t, err)
		assert.Equal(t, len(msgs), u.MessageCount, "user %d's message count holds their reposts", i)
		for _, m := range msgs {
			if m.Kind == store.KindRepost {
				stored[m.RepostOfID] = append(stored[m.RepostOfID], m)
			}
		}
	}
	reposts := 0
	for _, rs := range stored {
		reposts += len(rs)
	}
	require.Equal(t, n.Reposts(), reposts, "every repost is in its reposter's outbox")
	for j := range n.Reposts() {
		want := n.Repost(j)
		got, err := b.FindMessageByID(ctx, want.ID)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	// The outbox names each repost's original, as fan-out on read needs.
	for i := range n.Users() {
		out, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{n.UserID(i)}, Range: store.Forward(store.NilID, 1000)})
		require.NoError(t, err)
		for _, e := range out {
			m, err := b.FindMessageByID(ctx, e.MessageID)
			require.NoError(t, err)
			assert.Equal(t, m.RepostOfID, e.RepostOfID, "outbox entry %s", e.MessageID)
			assert.Equal(t, m.RepostOfAuthorID, e.RepostOfAuthorID, "outbox entry %s", e.MessageID)
		}
	}
	for i := range n.Users() {
		msgs, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: n.UserID(i), Range: store.Forward(store.NilID, 1000)})
		require.NoError(t, err)
		for _, m := range msgs {
			if m.Kind != store.KindRepost {
				assert.Equal(t, len(stored[m.ID]), m.RepostCount, "message %s's repost count", m.ID)
			}
		}
	}

	// FindReposts answers for every reposter, and NilID where a user has
	// none.
	for id, rs := range stored {
		key := store.MessageKey{ID: id, AuthorID: rs[0].RepostOfAuthorID}
		for _, r := range rs {
			found, err := b.FindReposts(ctx, r.AuthorID, []store.MessageKey{key})
			require.NoError(t, err)
			assert.Equal(t, []store.ID{r.ID}, found)
		}
		found, err := b.FindReposts(ctx, rs[0].RepostOfAuthorID, []store.MessageKey{key})
		require.NoError(t, err)
		assert.Equal(t, []store.ID{store.NilID}, found, "no one reposts their own message")
	}

	// Reposting a reposted message again is CONFLICT.
	r := n.Repost(0)
	again := *r
	again.ID = store.NewID(r.CreatedAt.Add(time.Hour))
	again.CreatedAt = again.ID.Time().UTC()
	err := b.CreateMessage(ctx, &again, nil)
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "%v", err)
	orig, err := b.FindMessageByID(ctx, r.RepostOfID)
	require.NoError(t, err)
	assert.Equal(t, len(stored[r.RepostOfID]), orig.RepostCount, "a refused repost counts nothing")
	_, err = b.FindMessageByID(ctx, again.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a refused repost is not stored")
}

func nilIfEmpty(ls []store.Like) []store.Like {
	if len(ls) == 0 {
		return nil
	}
	return ls
}
