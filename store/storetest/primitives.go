package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
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
	t.Run("ByHandlesAligned", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u1, u2 := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		got, err := b.FindUsersByHandles(ctx, []string{u2.Handle, "nobody", u1.Handle, u2.Handle})
		require.NoError(t, err)
		require.Len(t, got, 4)
		assert.Equal(t, u2, got[0])
		assert.Nil(t, got[1])
		assert.Equal(t, u1, got[2])
		assert.Equal(t, u2, got[3])
		none, err := b.FindUsersByHandles(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, none)
	})
	t.Run("Update", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		name := "New Name"
		got, err := b.UpdateUser(ctx, u.ID, storage.UserUpdate{DisplayName: &name})
		require.NoError(t, err)
		assert.Equal(t, name, got.DisplayName)
		assert.Equal(t, name, mustUser(t, b, u.ID).DisplayName)
		assert.Equal(t, u.LastSeenAt, got.LastSeenAt)
	})
	t.Run("UpdateProfile", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		bio, web, avatar := "Line one\nline two", "https://example.com/me", "https://example.com/me.png"
		got, err := b.UpdateUser(ctx, u.ID, storage.UserUpdate{Bio: &bio, WebsiteURL: &web, AvatarURL: &avatar})
		require.NoError(t, err)
		assert.Equal(t, u.DisplayName, got.DisplayName, "a field left out stays")
		assert.Equal(t, []string{bio, web, avatar}, []string{got.Bio, got.WebsiteURL, got.AvatarURL})
		assert.Equal(t, got, mustUser(t, b, u.ID))
		empty, name := "", "Renamed"
		got, err = b.UpdateUser(ctx, u.ID, storage.UserUpdate{DisplayName: &name, WebsiteURL: &empty})
		require.NoError(t, err)
		assert.Equal(t, []string{name, bio, "", avatar}, []string{got.DisplayName, got.Bio, got.WebsiteURL, got.AvatarURL})
		assert.Equal(t, got, mustUser(t, b, u.ID))
		_, err = b.UpdateUser(ctx, store.NewID(c.Now()), storage.UserUpdate{Bio: &bio})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	})
	t.Run("SearchUsers", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		mk := func(handle, name string) *store.User {
			now := c.Now()
			u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: name, PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now}
			require.NoError(t, b.CreateUser(ctx, u))
			return u
		}
		zoe := mk("zoe_smith", "Zoë Smith")
		smitty := mk("smitty", "Smitty Smithers")
		mk("bob", "Bob")
		handles := func(prefix string, limit int) []string {
			t.Helper()
			users, err := b.SearchUsers(ctx, prefix, limit)
			require.NoError(t, err)
			var out []string
			for _, u := range users {
				out = append(out, u.Handle)
			}
			slices.Sort(out)
			return out
		}
		assert.Equal(t, []string{"smitty", "zoe_smith"}, handles("smi", 10), "a handle's prefix, or a name word's; each user once")
		assert.Equal(t, []string{"zoe_smith"}, handles("zoe", 10), "by handle and by the folded name word zoe")
		assert.Equal(t, []string{"bob"}, handles("bob", 10))
		assert.Empty(t, handles("smithz", 10))
		assert.Len(t, handles("s", 1), 1, "at most limit users")
		got, err := b.SearchUsers(ctx, "zoe_", 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, zoe, got[0], "the whole user")

		// A new name is found at once; the old one no longer is.
		name := "Jo Ann"
		_, err = b.UpdateUser(ctx, smitty.ID, storage.UserUpdate{DisplayName: &name})
		require.NoError(t, err)
		assert.Equal(t, []string{"zoe_smith"}, handles("smith", 10))
		assert.Equal(t, []string{"smitty"}, handles("ann", 10))
		assert.Equal(t, []string{"smitty"}, handles("smitt", 10), "the handle still finds the user")
	})
	t.Run("MarkSeen", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		seen := c.Now()
		returning, err := b.MarkSeen(ctx, u.ID, seen, time.Time{}, nil)
		require.NoError(t, err)
		assert.False(t, returning)
		assert.Equal(t, seen, mustUser(t, b, u.ID).LastSeenAt)
		_, err = b.MarkSeen(ctx, store.NewID(c.Now()), c.Now(), time.Time{}, nil)
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
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
		followers, err := b.FindFollowers(ctx, o.ID, []store.ID{a.ID, o.ID})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false}, followers, "a follows o; o does not follow itself")
		followers, err = b.FindFollowers(ctx, a.ID, []store.ID{o.ID})
		require.NoError(t, err)
		assert.Equal(t, []bool{false}, followers, "the edge has a direction")

		removed, err := b.Unfollow(ctx, a.ID, o.ID)
		require.NoError(t, err)
		assert.True(t, removed)
		removed, err = b.Unfollow(ctx, a.ID, o.ID)
		require.NoError(t, err)
		assert.False(t, removed)
		assert.Equal(t, 0, mustUser(t, b, a.ID).FollowingCount)
		followers, err = b.FindFollowers(ctx, o.ID, []store.ID{a.ID})
		require.NoError(t, err)
		assert.Equal(t, []bool{false}, followers, "unfollowed")
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
		page1, err := b.ListFollowers(ctx, star.ID, store.Forward(store.NilID, 3))
		require.NoError(t, err)
		page2, err := b.ListFollowers(ctx, star.ID, store.Forward(page1[2], 3))
		require.NoError(t, err)
		assert.Equal(t, fans, append(page1, page2...))

		following, err := b.ListFollowing(ctx, fans[0], store.Forward(store.NilID, 10))
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
		page1, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: a.ID, Range: store.Forward(store.NilID, 3)})
		require.NoError(t, err)
		page2, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: a.ID, Range: store.Forward(page1[2].ID, 3)})
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
		got, err := b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text, EditedAt: &at})
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
		_, err = b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		batch, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key(), {ID: reply.ID}})
		require.NoError(t, err)
		assert.Nil(t, batch[0])
		assert.Equal(t, reply.ID, batch[1].ID)
		outbox, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: a.ID, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		require.Len(t, outbox, 1)
		assert.Equal(t, reply.ID, outbox[0].ID)
		assert.Equal(t, 1, mustUser(t, b, a.ID).MessageCount)
	})
	t.Run("Mentions", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a := mustCreateUser(t, b, c)
		// Mentions are stored with the message and replaced by an edit;
		// an empty list mentions no one.
		u1, u2 := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mentioning := newMessage(c, a.ID, "hi")
		mentioning.Mentions = []store.ID{u2.ID, u1.ID}
		require.NoError(t, b.CreateMessage(ctx, mentioning, nil))
		got, err := b.FindMessageByID(ctx, mentioning.ID)
		require.NoError(t, err)
		assert.Equal(t, []store.ID{u2.ID, u1.ID}, got.Mentions)
		only := []store.ID{u1.ID}
		got, err = b.UpdateMessage(ctx, mentioning.ID, storage.MessageUpdate{Mentions: &only})
		require.NoError(t, err)
		assert.Equal(t, only, got.Mentions)
		none := []store.ID{}
		_, err = b.UpdateMessage(ctx, mentioning.ID, storage.MessageUpdate{Mentions: &none})
		require.NoError(t, err)
		cleared, err := b.FindMessagesByKeys(ctx, []store.MessageKey{mentioning.Key()})
		require.NoError(t, err)
		assert.Empty(t, cleared[0].Mentions)
		assert.Equal(t, "hi", cleared[0].Text, "the other fields stay")
	})
	t.Run("BatchAligned", func(t *testing.T) {
		// Keys in no order, repeated, missing below, between and above the
		// stored ones, and deleted: a batch read may sort or seek, but its
		// results stay aligned with the keys.
		b, c := openBackend(t, open), newClock()
		a := mustCreateUser(t, b, c)
		before := store.NewID(c.Now())
		var ms []*store.Message
		for i := range 5 {
			m := newMessage(c, a.ID, fmt.Sprintf("m%d", i))
			require.NoError(t, b.CreateMessage(ctx, m, nil))
			ms = append(ms, m)
		}
		after := store.NewID(c.Now())
		require.NoError(t, b.DeleteMessage(ctx, ms[2].ID, nil))
		keys := []store.MessageKey{ms[4].Key(), {ID: after, AuthorID: a.ID}, ms[0].Key(), ms[2].Key(), {ID: ms[3].ID}, {ID: before, AuthorID: a.ID}, ms[0].Key(), ms[1].Key(), ms[4].Key()}
		got, err := b.FindMessagesByKeys(ctx, keys)
		require.NoError(t, err)
		require.Len(t, got, len(keys))
		for i, k := range keys {
			if k.ID == before || k.ID == after || k.ID == ms[2].ID {
				assert.Nil(t, got[i], "key %d", i)
				continue
			}
			if assert.NotNil(t, got[i], "key %d", i) {
				assert.Equal(t, k.ID, got[i].ID, "key %d", i)
			}
		}
		assert.Equal(t, ms[1], got[7])
		empty, err := b.FindMessagesByKeys(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, empty)
	})
	t.Run("PulledCount", func(t *testing.T) { testPulledCount(t, open) })
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, open) })
	t.Run("OutboxReplies", func(t *testing.T) { testOutboxReplies(t, open) })
	t.Run("OutboxReposts", func(t *testing.T) { testOutboxReposts(t, open) })
}

func testPulledCount(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	a, o := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	pulled := func(author store.ID) *store.Message {
		m := newMessage(c, author, "pulled")
		m.Pulled = true
		require.NoError(t, b.CreateMessage(ctx, m, nil))
		return m
	}
	p1, p2 := pulled(a.ID), pulled(a.ID)
	pushed := newMessage(c, a.ID, "pushed")
	require.NoError(t, b.CreateMessage(ctx, pushed, nil))
	got, err := b.FindMessageByID(ctx, p1.ID)
	require.NoError(t, err)
	assert.True(t, got.Pulled)
	u := mustUser(t, b, a.ID)
	assert.Equal(t, 3, u.MessageCount)
	assert.Equal(t, 2, u.PulledCount)
	authors, err := b.ListPullAuthors(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.ID{a.ID}, authors)

	pulled(o.ID)
	authors, err = b.ListPullAuthors(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{a.ID, o.ID}, authors)

	require.NoError(t, b.DeleteMessage(ctx, pushed.ID, nil))
	assert.Equal(t, 2, mustUser(t, b, a.ID).PulledCount, "deleting a pushed message leaves PulledCount")
	require.NoError(t, b.DeleteMessage(ctx, p1.ID, nil))
	assert.Equal(t, 1, mustUser(t, b, a.ID).PulledCount)
	require.NoError(t, b.DeleteMessage(ctx, p2.ID, nil))
	u = mustUser(t, b, a.ID)
	assert.Equal(t, 0, u.PulledCount)
	assert.Equal(t, 0, u.MessageCount)
	authors, err = b.ListPullAuthors(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.ID{o.ID}, authors, "an author with no pulled message left is not listed")
}

// outboxIDs returns the message IDs of entries.
func outboxIDs(entries []storage.OutboxEntry) []store.ID {
	ids := make([]store.ID, len(entries))
	for i, e := range entries {
		ids[i] = e.MessageID
	}
	return ids
}

func testOutbox(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	a, bb, other, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	create := func(author store.ID, pulled bool, job bool) *store.Message {
		m := newMessage(c, author, "m")
		m.Pulled = pulled
		var j *storage.Job
		if job {
			j = newDeliverJob(m, storage.LayoutBuckets)
		}
		require.NoError(t, b.CreateMessage(ctx, m, j))
		return m
	}
	a1 := create(a.ID, false, false)
	b1 := create(bb.ID, false, false)
	a2 := create(a.ID, true, false)
	create(other.ID, false, false)
	b2 := create(bb.ID, true, false)
	a3 := create(a.ID, false, true) // its JobDeliver is still stored
	authors := []store.ID{a.ID, bb.ID}

	find := func(f storage.OutboxFilter) []storage.OutboxEntry {
		t.Helper()
		f.Authors = authors
		got, err := b.FindOutbox(ctx, f)
		require.NoError(t, err)
		return got
	}
	all := find(storage.OutboxFilter{Range: store.Forward(store.NilID, 10)})
	assert.Equal(t, []store.ID{a3.ID, b2.ID, a2.ID, b1.ID, a1.ID}, outboxIDs(all), "merged newest first")
	for _, e := range all {
		assert.Equal(t, e.MessageID == a3.ID, e.Pending, "pending is the stored JobDeliver")
	}
	assert.Equal(t, store.InboxEntry{MessageID: b2.ID, AuthorID: bb.ID, CreatedAt: b2.CreatedAt}, all[1].InboxEntry)

	// Paging with Before loses and repeats nothing.
	var paged []store.ID
	before := store.NilID
	for range 4 {
		page := find(storage.OutboxFilter{Range: store.Forward(before, 2)})
		paged = append(paged, outboxIDs(page)...)
		if len(page) < 2 {
			break
		}
		before = page[len(page)-1].MessageID
	}
	assert.Equal(t, outboxIDs(all), paged)

	assert.Equal(t, []store.ID{b2.ID, a2.ID}, outboxIDs(find(storage.OutboxFilter{Range: store.Forward(store.NilID, 10), Pulled: storage.PulledOnly})))
	assert.Equal(t, []store.ID{a3.ID, b1.ID, a1.ID}, outboxIDs(find(storage.OutboxFilter{Range: store.Forward(store.NilID, 10), Pulled: storage.PushedOnly})))
	assert.Equal(t, []store.ID{b1.ID}, outboxIDs(find(storage.OutboxFilter{Range: store.Forward(a2.ID, 1), Pulled: storage.PushedOnly})))

	count := func(f storage.OutboxFilter) int {
		t.Helper()
		f.Authors = authors
		n, err := b.CountOutbox(ctx, f)
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, 5, count(storage.OutboxFilter{}))
	assert.Equal(t, 2, count(storage.OutboxFilter{After: a2.ID}))
	assert.Equal(t, 2, count(storage.OutboxFilter{Pulled: storage.PulledOnly}))
	assert.Equal(t, 1, count(storage.OutboxFilter{After: a2.ID, Pulled: storage.PushedOnly}))

	// Once its job has delivered it, a3 is no longer pending.
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: newDeliverJob(a3, storage.LayoutBuckets), Owners: []store.ID{fan.ID}, At: c.Now(), Done: true})
	require.NoError(t, err)
	assert.False(t, find(storage.OutboxFilter{Range: store.Forward(store.NilID, 1)})[0].Pending)

	require.NoError(t, b.DeleteMessage(ctx, b1.ID, nil))
	assert.Equal(t, []store.ID{a3.ID, b2.ID, a2.ID, a1.ID}, outboxIDs(find(storage.OutboxFilter{Range: store.Forward(store.NilID, 10)})), "a deleted message leaves the outbox")
	assert.Equal(t, 4, count(storage.OutboxFilter{}))
	none, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{fan.ID}, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	assert.Empty(t, none)
}

// testOutboxReplies checks the home timeline's rule for replies in
// FindOutbox and CountOutbox: a reply to another user passes only if the reader follows
// that user, is that user, or wrote it; posts and replies to oneself pass.
func testOutboxReplies(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	reader, a, followed, stranger := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	post := func(author store.ID, replyTo *store.Message) *store.Message {
		m := newMessage(c, author, "m")
		if replyTo != nil {
			m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, replyTo.ID, replyTo.AuthorID
			m.RootID, m.RootAuthorID = replyTo.ID, replyTo.AuthorID
		}
		require.NoError(t, b.CreateMessage(ctx, m, nil))
		return m
	}
	ofStranger, ofFollowed, ofReader, ofA := post(stranger.ID, nil), post(followed.ID, nil), post(reader.ID, nil), post(a.ID, nil)
	toStranger := post(a.ID, ofStranger)      // hidden
	toFollowed := post(a.ID, ofFollowed)      // shown: the reader follows followed
	toReader := post(a.ID, ofReader)          // shown: a reply to the reader
	toSelf := post(a.ID, ofA)                 // shown: a reply to oneself
	readersOwn := post(reader.ID, ofStranger) // shown: the reader's own
	aPost := post(a.ID, nil)

	authors := []store.ID{a.ID, followed.ID, reader.ID}
	rule := storage.NewHomeRule(reader.ID, []store.ID{a.ID, followed.ID})
	got, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 20), Home: rule})
	require.NoError(t, err)
	want := []store.ID{aPost.ID, readersOwn.ID, toSelf.ID, toReader.ID, toFollowed.ID, ofA.ID, ofReader.ID, ofFollowed.ID}
	assert.Equal(t, want, outboxIDs(got))
	for _, e := range got {
		switch e.MessageID {
		case toFollowed.ID:
			assert.Equal(t, followed.ID, e.ReplyToAuthorID, "an entry names the user its message replies to")
		case aPost.ID:
			assert.True(t, e.ReplyToAuthorID.IsZero())
		}
	}
	// A page stays full past a hidden reply, both ways.
	page, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(toFollowed.ID, 1), Home: rule})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{ofA.ID}, outboxIDs(page))
	page, err = b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Backward(ofA.ID, 2), Home: rule})
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{toFollowed.ID, toReader.ID}, outboxIDs(page))

	all, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 20)})
	require.NoError(t, err)
	assert.Len(t, all, len(want)+1, "without a rule, the reply to a stranger is there")

	n, err := b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, Home: rule})
	require.NoError(t, err)
	assert.Equal(t, len(want), n)
	n, err = b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, After: toStranger.ID, Home: rule})
	require.NoError(t, err)
	assert.Equal(t, 5, n, "above the hidden reply: toFollowed, toReader, toSelf, the reader's own, aPost")
}

// testOutboxReposts checks the home timeline's rule for reposts in
// FindOutbox and CountOutbox: a repost passes unless the reader wrote its
// original or follows the original's author, but the reader's own reposts
// pass unless marked hidden when made, whatever the reader follows now;
// the rest of the rule (replies) holds beside it.
func testOutboxReposts(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	reader, a, followed, stranger := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	ofStranger, ofFollowed, ofReader, ofA := storeMessage(t, b, c, stranger.ID), storeMessage(t, b, c, followed.ID), storeMessage(t, b, c, reader.ID), storeMessage(t, b, c, a.ID)
	ofStranger2 := storeMessage(t, b, c, stranger.ID)
	repost := func(user store.ID, orig *store.Message, hidden bool) *store.Message {
		r := newRepost(c, user, orig)
		r.HomeHidden = hidden
		require.NoError(t, b.CreateMessage(ctx, r, nil))
		return r
	}
	aStranger := repost(a.ID, ofStranger, true)             // shown: a's mark is of a's own home alone
	aFollowed := repost(a.ID, ofFollowed, false)            // hidden: the reader follows followed
	aReader := repost(a.ID, ofReader, false)                // hidden: the reader wrote it
	aOwn := repost(a.ID, ofA, true)                         // hidden: the reader follows a
	readerStranger := repost(reader.ID, ofStranger2, false) // shown: the reader's own, of a stranger
	readerFollowed := repost(reader.ID, ofFollowed, true)   // hidden: the reader's own, of a followee
	readerOwn := repost(reader.ID, ofReader, true)          // hidden: the reader's own, of their own
	readerA := repost(reader.ID, ofA, false)                // shown: the reader's own, made before they followed a
	toStranger := newMessage(c, a.ID, "reply")
	toStranger.Kind, toStranger.ReplyToID, toStranger.ReplyToAuthorID = store.KindReply, ofStranger.ID, stranger.ID
	toStranger.RootID, toStranger.RootAuthorID = ofStranger.ID, stranger.ID
	require.NoError(t, b.CreateMessage(ctx, toStranger, nil)) // hidden: a reply to a stranger
	aPost := storeMessage(t, b, c, a.ID)

	authors := []store.ID{a.ID, followed.ID, reader.ID}
	rule := storage.NewHomeRule(reader.ID, []store.ID{a.ID, followed.ID})
	got, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 20), Home: rule})
	require.NoError(t, err)
	want := []store.ID{aPost.ID, readerA.ID, readerStranger.ID, aStranger.ID, ofA.ID, ofReader.ID, ofFollowed.ID}
	assert.Equal(t, want, outboxIDs(got))
	for _, e := range got {
		if e.MessageID == aStranger.ID {
			assert.Equal(t, store.MessageKey{ID: ofStranger.ID, AuthorID: stranger.ID}, store.MessageKey{ID: e.RepostOfID, AuthorID: e.RepostOfAuthorID})
		}
	}
	// A page stays full past the hidden reposts, both ways.
	page, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(readerStranger.ID, 2), Home: rule})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{aStranger.ID, ofA.ID}, outboxIDs(page))
	page, err = b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Backward(aStranger.ID, 2), Home: rule})
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{readerStranger.ID, readerA.ID}, outboxIDs(page))

	// The reader's own outbox alone, with no followees at hand: the marks
	// decide, as with them.
	own, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{reader.ID}, Range: store.Forward(store.NilID, 20), Home: storage.NewHomeRule(reader.ID, nil)})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{readerA.ID, readerStranger.ID, ofReader.ID}, outboxIDs(own))

	all, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 20)})
	require.NoError(t, err)
	assert.Len(t, all, len(want)+6, "without a rule, every repost and the reply are there")
	for _, hidden := range []*store.Message{aFollowed, aReader, aOwn, readerFollowed, readerOwn} {
		assert.Contains(t, outboxIDs(all), hidden.ID)
	}

	n, err := b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, Home: rule})
	require.NoError(t, err)
	assert.Equal(t, len(want), n)
	n, err = b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, After: aStranger.ID, Home: rule})
	require.NoError(t, err)
	assert.Equal(t, 3, n, "above a's repost of the stranger: the reader's reposts of the stranger and of a, and aPost")
}
