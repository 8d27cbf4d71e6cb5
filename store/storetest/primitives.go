package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func testUsers(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		got, err := b.FindUserByID(ctx, u.ID)
		require.NoError(t, err)
		assert.Equal(t, u, got)
		got, err = b.FindUserByHandle(ctx, u.Handle)
		require.NoError(t, err)
		assert.Equal(t, u.ID, got.ID)
	})
	t.Run("ErrConflict", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		dup := *u
		dup.ID = store.NewID(c.Now())
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(b.CreateUser(ctx, &dup)))
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		_, err := b.FindUserByID(ctx, store.NewID(c.Now()))
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		_, err = b.FindUserByHandle(ctx, "nobody")
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	})
	t.Run("BatchAligned", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u1, u2 := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		missing := store.NewID(c.Now())
		got, err := b.FindUsersByIDs(ctx, []store.ID{u2.ID, missing, u1.ID, u2.ID})
		require.NoError(t, err)
		require.Len(t, got, 4)
		assert.Equal(t, u2.ID, got[0].ID)
		assert.Nil(t, got[1])
		assert.Equal(t, u1.ID, got[2].ID)
		assert.Equal(t, u2.ID, got[3].ID)
	})
	t.Run("Update", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		name, seen := "New Name", c.Now()
		got, err := b.UpdateUser(ctx, u.ID, store.UserUpdate{DisplayName: &name, LastSeenAt: &seen})
		require.NoError(t, err)
		assert.Equal(t, name, got.DisplayName)
		assert.Equal(t, seen, mustUser(t, b, u.ID).LastSeenAt)
	})
}

func testFollows(t *testing.T, open OpenFunc) {
	t.Run("CountsAndIdempotence", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a, o := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mustFollow(t, b, c, a.ID, o.ID)
		again, err := b.Follow(ctx, a.ID, o.ID, c.Now())
		require.NoError(t, err)
		assert.False(t, again, "following twice counts once")
		assert.Equal(t, 1, mustUser(t, b, a.ID).FollowingCount)
		assert.Equal(t, 1, mustUser(t, b, o.ID).FollowerCount)

		follows, err := b.FindFollowing(ctx, a.ID, []store.ID{o.ID, a.ID})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false}, follows)

		removed, err := b.Unfollow(ctx, a.ID, o.ID)
		require.NoError(t, err)
		assert.True(t, removed)
		removed, err = b.Unfollow(ctx, a.ID, o.ID)
		require.NoError(t, err)
		assert.False(t, removed)
		assert.Equal(t, 0, mustUser(t, b, a.ID).FollowingCount)
		assert.Equal(t, 0, mustUser(t, b, o.ID).FollowerCount)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a := mustCreateUser(t, b, c)
		_, err := b.Follow(ctx, a.ID, store.NewID(c.Now()), c.Now())
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		assert.Equal(t, 0, mustUser(t, b, a.ID).FollowingCount)
	})
	t.Run("ListInIDOrder", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		star := mustCreateUser(t, b, c)
		var fans []store.ID
		for range 5 {
			f := mustCreateUser(t, b, c)
			fans = append(fans, f.ID)
		}
		// Follow in reverse order: listing is by id, not by time.
		for i := len(fans) - 1; i >= 0; i-- {
			mustFollow(t, b, c, fans[i], star.ID)
		}
		page1, err := b.ListFollowers(ctx, star.ID, store.NilID, 3)
		require.NoError(t, err)
		page2, err := b.ListFollowers(ctx, star.ID, page1[2], 3)
		require.NoError(t, err)
		assert.Equal(t, fans, append(page1, page2...))

		following, err := b.ListFollowing(ctx, fans[0], store.NilID, 10)
		require.NoError(t, err)
		require.Len(t, following, 1)
		assert.Equal(t, star.ID, following[0])
	})
}

func testMessages(t *testing.T, open OpenFunc) {
	t.Run("OutboxNewestFirst", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a := mustCreateUser(t, b, c)
		var ids []store.ID
		for i := range 5 {
			m := newMessage(c, a.ID, "m")
			m.Text = string(rune('a' + i))
			require.NoError(t, b.CreateMessage(ctx, m, nil))
			ids = append(ids, m.ID)
		}
		assert.Equal(t, 5, mustUser(t, b, a.ID).MessageCount)
		page1, err := b.FindMessages(ctx, store.MessageFilter{AuthorID: a.ID, Limit: 3})
		require.NoError(t, err)
		page2, err := b.FindMessages(ctx, store.MessageFilter{AuthorID: a.ID, Before: page1[2].ID, Limit: 3})
		require.NoError(t, err)
		var got []store.ID
		for _, m := range append(page1, page2...) {
			got = append(got, m.ID)
		}
		assert.Equal(t, []store.ID{ids[4], ids[3], ids[2], ids[1], ids[0]}, got)
		assert.Equal(t, "e", page1[0].Text)
	})
	t.Run("EditAndDelete", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a := mustCreateUser(t, b, c)
		m := newMessage(c, a.ID, "first")
		reply := newMessage(c, a.ID, "reply")
		reply.Kind, reply.ReplyToID, reply.ReplyToAuthorID = store.KindReply, m.ID, a.ID
		require.NoError(t, b.CreateMessage(ctx, m, nil))
		require.NoError(t, b.CreateMessage(ctx, reply, nil))

		text, at := "edited", c.Now()
		got, err := b.UpdateMessage(ctx, m.ID, store.MessageUpdate{Text: &text, EditedAt: &at})
		require.NoError(t, err)
		assert.Equal(t, "edited", got.Text)
		got, err = b.FindMessageByID(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, "edited", got.Text)
		require.NotNil(t, got.EditedAt)
		assert.Equal(t, at, *got.EditedAt)
		got, err = b.FindMessageByID(ctx, reply.ID)
		require.NoError(t, err)
		assert.Equal(t, reply, got)

		require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
		_, err = b.FindMessageByID(ctx, m.ID)
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(b.DeleteMessage(ctx, m.ID, nil)))
		_, err = b.UpdateMessage(ctx, m.ID, store.MessageUpdate{Text: &text})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		batch, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key(), {ID: reply.ID}})
		require.NoError(t, err)
		assert.Nil(t, batch[0])
		assert.Equal(t, reply.ID, batch[1].ID)
		outbox, err := b.FindMessages(ctx, store.MessageFilter{AuthorID: a.ID, Limit: 10})
		require.NoError(t, err)
		require.Len(t, outbox, 1)
		assert.Equal(t, reply.ID, outbox[0].ID)
		assert.Equal(t, 1, mustUser(t, b, a.ID).MessageCount)
	})
}

// readAll pages through an inbox with the given page size.
func readAll(t *testing.T, b store.Backend, owner store.ID, pageSize int) ([]store.InboxItem, int) {
	t.Helper()
	var all []store.InboxItem
	var before uint64
	pages := 0
	for {
		items, _, err := b.ReadInbox(ctx, store.InboxFilter{Owner: owner, Before: before, Limit: pageSize})
		require.NoError(t, err)
		pages++
		all = append(all, items...)
		if len(items) < pageSize {
			return all, pages
		}
		before = items[len(items)-1].Seq
	}
}

func buckets(items []store.InboxItem) int {
	seen := map[uint64]bool{}
	for _, it := range items {
		seen[(it.Seq-1)/store.BucketSize] = true
	}
	return len(seen)
}

func testInbox(t *testing.T, open OpenFunc) {
	for _, n := range []int{49, 50, 51, 100, 101} {
		t.Run(fmt.Sprintf("Rollover%d", n), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
			var msgs []store.ID
			for range n {
				msgs = append(msgs, mustPostTo(t, b, c, author.ID, owner.ID).ID)
			}
			items, counts, err := b.ReadInbox(ctx, store.InboxFilter{Owner: owner.ID, Limit: 50})
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Seq: uint64(n), Total: n, Unread: n}, counts)
			require.Len(t, items, min(n, 50))
			assert.LessOrEqual(t, buckets(items), 2, "newest 50 span at most 2 buckets")
			assert.Equal(t, msgs[n-1], items[0].MessageID, "newest first")
			assert.Equal(t, uint64(n), items[0].Seq)

			items100, _, err := b.ReadInbox(ctx, store.InboxFilter{Owner: owner.ID, Limit: 100})
			require.NoError(t, err)
			assert.LessOrEqual(t, buckets(items100), 3, "newest 100 span at most 3 buckets")

			all, _ := readAll(t, b, owner.ID, 50)
			require.Len(t, all, n)
			for i, it := range all {
				assert.Equal(t, msgs[n-1-i], it.MessageID)
				assert.Equal(t, author.ID, it.AuthorID)
				assert.Equal(t, uint64(n-i), it.Seq)
			}
		})
	}
	t.Run("MarkReadAndRemove", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		author, x, y := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		old := mustPostTo(t, b, c, author.ID, x.ID, y.ID)
		counts, err := b.MarkInboxRead(ctx, x.ID)
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Seq: 1, ReadSeq: 1, Total: 1, Unread: 0}, counts)
		mustPostTo(t, b, c, author.ID, x.ID, y.ID)

		// Retract the older message: x had read it, y had not.
		retract := &store.Job{Kind: store.JobRetract, MessageID: old.ID, AuthorID: author.ID, CreatedAt: old.CreatedAt}
		require.NoError(t, b.DeleteMessage(ctx, old.ID, retract))
		refs, next, err := b.FindDeliveries(ctx, old.ID, nil, 100)
		require.NoError(t, err)
		assert.Nil(t, next)
		assert.ElementsMatch(t, []store.InboxRef{{Owner: x.ID, Seq: 1}, {Owner: y.ID, Seq: 1}}, refs)
		changes, err := b.RemoveInboxEntries(ctx, store.Removal{Job: retract, Refs: refs, Done: true})
		require.NoError(t, err)
		assert.Len(t, changes, 2)

		_, cx, err := b.ReadInbox(ctx, store.InboxFilter{Owner: x.ID})
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Seq: 2, ReadSeq: 1, Total: 1, Unread: 1}, cx)
		items, cy, err := b.ReadInbox(ctx, store.InboxFilter{Owner: y.ID, Limit: 10})
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Seq: 2, Total: 1, Unread: 1}, cy)
		require.Len(t, items, 1)
		assert.Equal(t, uint64(2), items[0].Seq)

		// The job is gone, so a repeated removal is refused and nothing changes.
		_, err = b.RemoveInboxEntries(ctx, store.Removal{Job: retract, Refs: refs, Done: true})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		refs, _, err = b.FindDeliveries(ctx, old.ID, nil, 100)
		require.NoError(t, err)
		assert.Empty(t, refs, "delivery records are dropped with the job")
	})
	t.Run("EmptyInbox", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		items, counts, err := b.ReadInbox(ctx, store.InboxFilter{Owner: u.ID, Limit: 50})
		require.NoError(t, err)
		assert.Empty(t, items)
		assert.Equal(t, store.InboxCounts{}, counts)
	})
}

func testJobs(t *testing.T, open OpenFunc) {
	t.Run("ChunksApplyOnce", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		author := mustCreateUser(t, b, c)
		var owners []store.ID
		for range 4 {
			owners = append(owners, mustCreateUser(t, b, c).ID)
		}
		m := newMessage(c, author.ID, "hi")
		job := deliverJob(m)
		require.NoError(t, b.CreateMessage(ctx, m, job))
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, job.MessageID, pending[0].MessageID)
		assert.Equal(t, store.JobDeliver, pending[0].Kind)
		assert.Empty(t, pending[0].Cursor)

		first := store.Delivery{Job: job, Owners: owners[:2], At: c.Now(), Cursor: owners[1][:]}
		changes, err := b.DeliverInbox(ctx, first)
		require.NoError(t, err)
		assert.Len(t, changes, 2)
		// The same chunk again (a retry after a crash) changes nothing.
		changes, err = b.DeliverInbox(ctx, first)
		require.NoError(t, err)
		assert.Empty(t, changes)
		pending, err = b.PendingJobs(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, owners[1][:], pending[0].Cursor, "progress is stored with the chunk")

		second := store.Delivery{Job: pending[0], Owners: owners[2:], At: c.Now(), Done: true}
		changes, err = b.DeliverInbox(ctx, second)
		require.NoError(t, err)
		assert.Len(t, changes, 2)
		pending, err = b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
		for _, o := range owners {
			_, counts, err := b.ReadInbox(ctx, store.InboxFilter{Owner: o})
			require.NoError(t, err)
			assert.Equal(t, 1, counts.Total, "each owner got the message once")
		}
	})
	t.Run("DeletionCancelsDelivery", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		m := newMessage(c, author.ID, "oops")
		job := deliverJob(m)
		require.NoError(t, b.CreateMessage(ctx, m, job))
		require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
		_, err := b.DeliverInbox(ctx, store.Delivery{Job: job, Owners: []store.ID{owner.ID}, At: c.Now(), Done: true})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		_, counts, err := b.ReadInbox(ctx, store.InboxFilter{Owner: owner.ID})
		require.NoError(t, err)
		assert.Equal(t, 0, counts.Total)
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
	})
}
