package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testReposts(t *testing.T, open OpenFunc) {
	t.Run("RepostAndUnrepost", func(t *testing.T) { testRepostAndUnrepost(t, open) })
	t.Run("Outbox", func(t *testing.T) { testRepostOutbox(t, open) })
	t.Run("HomeHidden", func(t *testing.T) { testRepostHomeHidden(t, open) })
	t.Run("ErrNotFound", func(t *testing.T) { testRepostNotFound(t, open) })
	t.Run("OriginalDeleted", func(t *testing.T) { testRepostOriginalDeleted(t, open) })
	t.Run("Retracted", func(t *testing.T) { testRepostRetracted(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testRepostsConcurrent(t, open) })
	t.Run("List", func(t *testing.T) { testListReposts(t, open) })
}

// newRepost returns user's repost of orig, as the service makes it.
func newRepost(c *clock, user store.ID, orig *store.Message) *store.Message {
	now := c.Now()
	return &store.Message{ID: store.NewID(now), AuthorID: user, Kind: store.KindRepost, RepostOfID: orig.ID, RepostOfAuthorID: orig.AuthorID, CreatedAt: now}
}

// mustRepost stores user's repost of orig, with no job.
func mustRepost(t *testing.T, b storage.Backend, c *clock, user store.ID, orig *store.Message) *store.Message {
	t.Helper()
	r := newRepost(c, user, orig)
	require.NoError(t, b.CreateMessage(ctx, r, nil))
	return r
}

// repostCount reads a message's RepostCount through both single and batch
// reads, and checks they agree.
func repostCount(t *testing.T, b storage.Backend, m *store.Message) int {
	t.Helper()
	byID, err := b.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	byKey, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	require.NotNil(t, byKey[0])
	assert.Equal(t, byID.RepostCount, byKey[0].RepostCount, "FindMessagesByKeys agrees with FindMessageByID")
	return byID.RepostCount
}

// findReposts returns user's reposts of ms, aligned.
func findReposts(t *testing.T, b storage.Backend, user store.ID, ms ...*store.Message) []store.ID {
	t.Helper()
	keys := make([]store.MessageKey, len(ms))
	for i, m := range ms {
		keys[i] = m.Key()
	}
	got, err := b.FindReposts(ctx, user, keys)
	require.NoError(t, err)
	require.Len(t, got, len(ms))
	return got
}

func testRepostAndUnrepost(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	unreposted := storeMessage(t, b, c, author.ID)

	r1 := mustRepost(t, b, c, fan.ID, m)
	assert.Equal(t, 1, repostCount(t, b, m))
	assert.Equal(t, 1, mustUser(t, b, fan.ID).MessageCount, "a repost is one of its author's messages")
	got, err := b.FindMessageByID(ctx, r1.ID)
	require.NoError(t, err)
	assert.Equal(t, r1, got, "a repost reads back as stored: kind, original, no text")

	again := newRepost(c, fan.ID, m)
	err = b.CreateMessage(ctx, again, nil)
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "a second repost by the same user: %v", err)
	assert.Equal(t, 1, repostCount(t, b, m), "the refused repost counts nowhere")
	assert.Equal(t, 1, mustUser(t, b, fan.ID).MessageCount)
	_, err = b.FindMessageByID(ctx, again.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the refused repost is not stored")

	r2 := mustRepost(t, b, c, other.ID, m)
	assert.Equal(t, 2, repostCount(t, b, m), "another user's repost")
	own := mustRepost(t, b, c, author.ID, m)
	assert.Equal(t, 3, repostCount(t, b, m), "one's own message may be reposted")
	assert.Equal(t, 0, repostCount(t, b, unreposted))

	assert.Equal(t, []store.ID{r1.ID, store.NilID, r1.ID}, findReposts(t, b, fan.ID, m, unreposted, &store.Message{ID: m.ID}),
		"aligned with the keys, NilID where none, the author not needed")
	assert.Equal(t, []store.ID{r2.ID}, findReposts(t, b, other.ID, m))
	assert.Equal(t, []store.ID{own.ID, store.NilID}, findReposts(t, b, author.ID, m, unreposted))
	none, err := b.FindReposts(ctx, fan.ID, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	// An edit and a like keep the count.
	text := "edited"
	edited, err := b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text})
	require.NoError(t, err)
	assert.Equal(t, 3, edited.RepostCount)
	_, err = b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	assert.Equal(t, 3, repostCount(t, b, m))

	// Unrepost: the count goes down, and the user may repost again.
	require.NoError(t, b.DeleteMessage(ctx, r1.ID, nil))
	assert.Equal(t, 2, repostCount(t, b, m))
	assert.Equal(t, 0, mustUser(t, b, fan.ID).MessageCount)
	assert.Equal(t, []store.ID{store.NilID}, findReposts(t, b, fan.ID, m))
	r3 := mustRepost(t, b, c, fan.ID, m)
	assert.Equal(t, 3, repostCount(t, b, m), "a repost again after an unrepost counts again")
	assert.Equal(t, []store.ID{r3.ID}, findReposts(t, b, fan.ID, m))
	got, err = b.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.LikeCount, "the repost count's writes keep the like count")
}

// testRepostOutbox checks that a user's outbox lists their reposts, and
// that FindOutbox says what each repost stands for, beside posts and
// replies.
func testRepostOutbox(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	post := storeMessage(t, b, c, fan.ID)
	r := mustRepost(t, b, c, fan.ID, m)
	reply := newMessage(c, fan.ID, "re")
	reply.Kind, reply.ReplyToID, reply.ReplyToAuthorID, reply.RootID, reply.RootAuthorID = store.KindReply, m.ID, author.ID, m.ID, author.ID
	require.NoError(t, b.CreateMessage(ctx, reply, nil))

	msgs, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: fan.ID, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, msgs, 3, "the outbox lists reposts with the user's own messages")
	assert.Equal(t, []store.ID{reply.ID, r.ID, post.ID}, replyIDs(msgs))
	assert.Equal(t, store.KindRepost, msgs[1].Kind)
	assert.Equal(t, m.ID, msgs[1].RepostOfID)
	assert.Equal(t, author.ID, msgs[1].RepostOfAuthorID)

	entries, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID, author.ID}, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, entries, 4)
	want := []storage.OutboxEntry{
		{InboxEntry: entryOf(reply), ReplyToAuthorID: author.ID},
		{InboxEntry: entryOf(r), RepostOfID: m.ID, RepostOfAuthorID: author.ID},
		{InboxEntry: entryOf(post)},
		{InboxEntry: entryOf(m)},
	}
	assert.Equal(t, want, entries, "a repost entry names its original; the others name none")
	n, err := b.CountOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID}})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

// testRepostHomeHidden checks that a repost's mark of not being at its
// author's own home is stored with it and read back by every read of the
// message and of the outbox, set or not.
func testRepostHomeHidden(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m, m2 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	hidden := newRepost(c, fan.ID, m)
	hidden.HomeHidden = true
	require.NoError(t, b.CreateMessage(ctx, hidden, nil))
	shown := mustRepost(t, b, c, fan.ID, m2)

	for _, r := range []*store.Message{hidden, shown} {
		byID, err := b.FindMessageByID(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r.HomeHidden, byID.HomeHidden, "FindMessageByID")
		byKey, err := b.FindMessagesByKeys(ctx, []store.MessageKey{r.Key()})
		require.NoError(t, err)
		require.NotNil(t, byKey[0])
		assert.Equal(t, r.HomeHidden, byKey[0].HomeHidden, "FindMessagesByKeys")
	}
	msgs, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: fan.ID, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, []bool{false, true}, []bool{msgs[0].HomeHidden, msgs[1].HomeHidden}, "FindMessages, newest first")

	entries, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID}, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	want := []storage.OutboxEntry{
		{InboxEntry: entryOf(shown), RepostOfID: m2.ID, RepostOfAuthorID: author.ID},
		{InboxEntry: entryOf(hidden), RepostOfID: m.ID, RepostOfAuthorID: author.ID, HomeHidden: true},
	}
	assert.Equal(t, want, entries, "FindOutbox")
	// The mark hides the repost from its author's home alone.
	own, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID}, Range: store.Forward(store.NilID, 10), Home: storage.NewHomeRule(fan.ID, nil)})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{shown.ID}, outboxIDs(own))
	other, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID}, Range: store.Forward(store.NilID, 10), Home: storage.NewHomeRule(store.NewID(c.Now()), []store.ID{fan.ID})})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{shown.ID, hidden.ID}, outboxIDs(other))
}

func testRepostNotFound(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	gone := storeMessage(t, b, c, author.ID)
	require.NoError(t, b.DeleteMessage(ctx, gone.ID, nil))
	never := newMessage(c, author.ID, "never stored")

	for name, orig := range map[string]*store.Message{"Deleted": gone, "Missing": never} {
		err := b.CreateMessage(ctx, newRepost(c, fan.ID, orig), nil)
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "%s: %v", name, err)
	}
	r := mustRepost(t, b, c, fan.ID, m)
	err := b.CreateMessage(ctx, newRepost(c, author.ID, r), nil)
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "a repost of a repost: %v", err)
	assert.Equal(t, 0, repostCount(t, b, r))
	assert.Equal(t, 1, mustUser(t, b, fan.ID).MessageCount, "only the repost counted")
	assert.Equal(t, 1, mustUser(t, b, author.ID).MessageCount)
	assert.Equal(t, []store.ID{store.NilID, store.NilID}, findReposts(t, b, fan.ID, gone, never))
}

// testRepostOriginalDeleted deletes a reposted message, then the repost:
// nothing fails, and the repost's own deletion frees the pair.
func testRepostOriginalDeleted(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	r := mustRepost(t, b, c, fan.ID, m)
	kept := mustRepost(t, b, c, other.ID, m)
	require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
	_, err := b.FindMessageByID(ctx, m.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	got, err := b.FindMessageByID(ctx, r.ID)
	require.NoError(t, err, "a repost outlives its original until deleted itself")
	assert.Equal(t, m.ID, got.RepostOfID)

	require.NoError(t, b.DeleteMessage(ctx, r.ID, nil), "deleting a repost of a deleted message")
	assert.Equal(t, 0, mustUser(t, b, fan.ID).MessageCount)
	assert.Equal(t, []store.ID{store.NilID}, findReposts(t, b, fan.ID, m))
	assert.Equal(t, []store.ID{kept.ID}, findReposts(t, b, other.ID, m))
	err = b.CreateMessage(ctx, newRepost(c, fan.ID, m), nil)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the original is gone: %v", err)
	require.NoError(t, b.DeleteMessage(ctx, kept.ID, retractFor(kept)))
}

func retractFor(m *store.Message) *storage.Job { return newRetractJob(m, storage.LayoutBuckets) }

// testRepostRetracted unreposts through a retraction (the repost was
// delivered): the count goes down at once, the user may repost at once,
// and the retraction's end changes no count again.
func testRepostRetracted(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan, follower := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	r := newRepost(c, fan.ID, m)
	job := newDeliverJob(r, storage.LayoutBuckets)
	require.NoError(t, b.CreateMessage(ctx, r, job))
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{follower.ID}, At: c.Now(), Done: true})
	require.NoError(t, err)
	items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: follower.ID, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, r.ID, items[0].MessageID, "the inbox holds the repost, keyed by its own ID")
	assert.Equal(t, 1, repostCount(t, b, m))

	retract(t, b, r, storage.LayoutBuckets)
	assert.Equal(t, 0, repostCount(t, b, m))
	assert.Equal(t, []store.ID{store.NilID}, findReposts(t, b, fan.ID, m))
	items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: follower.ID, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	assert.Empty(t, items)
	assert.Equal(t, 0, counts.Total)

	// Again, reposting while the retraction is still stored.
	r2 := mustRepost(t, b, c, fan.ID, m)
	require.NoError(t, b.DeleteMessage(ctx, r2.ID, retractFor(r2)))
	assert.Equal(t, 0, repostCount(t, b, m))
	r3 := mustRepost(t, b, c, fan.ID, m)
	assert.Equal(t, 1, repostCount(t, b, m), "a repost while the last one's retraction runs")
	assert.Equal(t, []store.ID{r3.ID}, findReposts(t, b, fan.ID, m))
	_, err = b.RemoveInboxEntries(ctx, storage.Removal{Job: retractFor(r2), Done: true})
	require.NoError(t, err)
	assert.Equal(t, 1, repostCount(t, b, m), "the retraction's end counts nothing again")
	assert.Equal(t, []store.ID{r3.ID}, findReposts(t, b, fan.ID, m))
	assert.Equal(t, 1, mustUser(t, b, fan.ID).MessageCount)
}

// testRepostsConcurrent has one user repost a message from several
// goroutines at once (exactly one repost is stored and counted), while
// other users repost and unrepost it.
func testRepostsConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	const tries, users = 6, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []store.ID
	for range tries {
		wg.Go(func() {
			r := newRepost(c, fan.ID, m)
			err := b.CreateMessage(ctx, r, nil)
			if err == nil {
				mu.Lock()
				stored = append(stored, r.ID)
				mu.Unlock()
				return
			}
			assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "%v", err)
		})
	}
	for range users {
		u := mustCreateUser(t, b, c)
		wg.Go(func() {
			for i := range 3 {
				r := newRepost(c, u.ID, m)
				if !assert.NoError(t, b.CreateMessage(ctx, r, nil)) {
					return
				}
				if i < 2 {
					assert.NoError(t, b.DeleteMessage(ctx, r.ID, nil))
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, stored, 1, "exactly one of the concurrent reposts is stored")
	assert.Equal(t, 1+users, repostCount(t, b, m))
	assert.Equal(t, stored, findReposts(t, b, fan.ID, m))
	assert.Equal(t, 1, mustUser(t, b, fan.ID).MessageCount)
	msgs, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: fan.ID, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	assert.Equal(t, stored, replyIDs(msgs))
}
