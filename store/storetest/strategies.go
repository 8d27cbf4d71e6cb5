package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// timeline is what a reader sees: the whole inbox, newest first, and its counts.
type timeline struct {
	Texts         []string
	Total, Unread int
}

func readTimeline(t *testing.T, svc *service.Service, owner store.ID) timeline {
	t.Helper()
	texts := inboxTexts(t, svc, owner, 50)
	// Every page size pages to the same timeline, across the boundaries of
	// a bucket and of a cache.
	for _, size := range []int{49, 51, 100, 101} {
		require.Equal(t, texts, inboxTexts(t, svc, owner, size), "page size %d", size)
	}
	// Backward, from the oldest item, pages of every size show the same.
	for _, size := range []int{1, 49, 50, 51, 101} {
		require.Equal(t, texts, inboxTextsBackward(t, svc, owner, size), "backward, page size %d", size)
	}
	c, err := svc.InboxCounts(ctx, owner)
	require.NoError(t, err)
	return timeline{Texts: texts, Total: c.Total, Unread: c.Unread}
}

// testSameTimelines plays one history (posts, replies, edits, deletions,
// follows with backfill, unfollows, mark-read, an author crossing hybrid's
// celebrity threshold both ways) under every strategy, and requires every
// strategy to show every reader the same timeline with the same counts.
func testSameTimelines(t *testing.T, open OpenFunc) {
	got := make(map[service.Strategy]map[string]timeline)
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st, CelebrityThreshold: 2})
			got[st] = playHistory(t, svc)
		})
	}
	want := got[service.StrategyBucket]
	require.NotNil(t, want)
	r1 := want["r1"]
	assert.Len(t, r1.Texts, 108, "r1's timeline: ann's 75 but one deleted, cel's 32 but two deleted, r1's own reply, and cel's replies to ann, to r1 and to cel")
	assert.Contains(t, r1.Texts, "r1 replies", "one's own messages are at home")
	assert.NotContains(t, r1.Texts, "cel to bo", "r1 does not follow bo")
	assert.Subset(t, r1.Texts, []string{"cel to ann", "cel to r1", "cel to cel"})
	r3 := want["r3"]
	assert.Subset(t, r3.Texts, []string{"cel to bo", "cel to cel"}, "r3 follows bo")
	assert.NotContains(t, r3.Texts, "cel to ann", "r3 does not follow ann")
	assert.NotContains(t, r3.Texts, "cel to r1", "r3 does not follow r1")
	assert.Subset(t, want["r2"].Texts, []string{"cel to ann", "cel to r1", "cel to cel"})
	assert.NotContains(t, want["r2"].Texts, "cel to bo")
	assert.Equal(t, "cel 31", r1.Texts[0], "the last post")
	assert.Contains(t, r1.Texts, "ann 10, edited")
	assert.NotContains(t, r1.Texts, "bo 0", "r1 unfollowed bo")
	assert.Equal(t, timeline{Texts: r1.Texts, Total: 107, Unread: 22}, r1, "unread: ann 60–74 and cel 25–31, posted after the mark; one's own reply is not counted")
	for _, st := range service.Strategies[1:] {
		if got[st] != nil {
			assert.Equal(t, want, got[st], "strategy %s against %s", st, service.StrategyBucket)
		}
	}
	t.Run("Reposts", func(t *testing.T) { testRepostsAtHome(t, open) })
}

// playHistory runs the shared history on svc and returns each reader's timeline.
func playHistory(t *testing.T, svc *service.Service) map[string]timeline {
	users := make(map[string]store.ID)
	for _, h := range []string{"ann", "bo", "cel", "r1", "r2", "r3"} {
		users[h] = mustSignUp(t, svc, "user_"+h).ID
	}
	follow := func(who, whom string) {
		t.Helper()
		_, err := svc.Follow(ctx, users[who], users[whom])
		require.NoError(t, err)
	}
	unfollow := func(who, whom string) {
		t.Helper()
		_, err := svc.Unfollow(ctx, users[who], users[whom])
		require.NoError(t, err)
	}
	posted := make(map[string]store.ID)
	post := func(who string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			text := fmt.Sprintf("%s %d", who, i)
			m, err := svc.PostMessage(ctx, users[who], service.PostInput{Text: text})
			require.NoError(t, err)
			posted[text] = m.ID
		}
	}

	follow("r1", "ann")
	follow("r1", "bo")
	follow("r2", "ann")
	post("ann", 0, 30)
	post("bo", 0, 20)
	reply, err := svc.PostMessage(ctx, users["r1"], service.PostInput{Text: "r1 replies", ReplyToID: posted["ann 5"]})
	require.NoError(t, err)
	require.Equal(t, store.KindReply, reply.Kind)
	// cel posts with no followers, then gains three: above the threshold (2).
	post("cel", 0, 10)
	follow("r1", "cel")
	follow("r2", "cel")
	follow("r3", "cel")
	post("cel", 10, 25)
	post("ann", 30, 60)
	follow("r3", "bo") // backfill: bo's 20
	_, err = svc.EditMessage(ctx, users["ann"], posted["ann 10"], "ann 10, edited")
	require.NoError(t, err)
	for _, text := range []string{"ann 11", "cel 3", "cel 12"} {
		author, _, _ := strings.Cut(text, " ")
		require.NoError(t, svc.DeleteMessage(ctx, users[author], posted[text]))
	}
	waitIdle(t, svc)
	unfollow("r1", "bo")
	follow("r2", "r1") // backfill: r1's reply
	waitIdle(t, svc)
	// Replies at home: cel (a celebrity now) answers four users. A reply
	// reaches a follower of cel who follows the user answered too, or is
	// that user; a reply to oneself reaches every follower.
	replyTo := func(who, text, to string) {
		t.Helper()
		m, err := svc.PostMessage(ctx, users[who], service.PostInput{Text: text, ReplyToID: posted[to]})
		require.NoError(t, err)
		posted[text] = m.ID
	}
	posted["r1 replies"] = reply.ID
	replyTo("cel", "cel to ann", "ann 7")     // r1, r2 follow ann; r3 does not
	replyTo("cel", "cel to bo", "bo 3")       // only r3 follows bo now
	replyTo("cel", "cel to r1", "r1 replies") // r1's own; r2 follows r1
	replyTo("cel", "cel to cel", "cel 1")     // to oneself: everyone
	waitIdle(t, svc)
	_, err = svc.MarkInboxRead(ctx, users["r1"])
	require.NoError(t, err)
	post("ann", 60, 75)
	post("cel", 25, 27)
	// cel drops to two followers (below the threshold), posts, and rises again.
	unfollow("r2", "cel")
	post("cel", 27, 30)
	follow("r2", "cel")
	post("cel", 30, 32)
	waitIdle(t, svc)

	out := make(map[string]timeline)
	for _, r := range []string{"r1", "r2", "r3"} {
		out[r] = readTimeline(t, svc, users[r])
	}
	return out
}

// testInactive checks that fan-out skips a user idle past InactiveAfter,
// and that their return rebuilds their inbox (saying so until it is done)
// to what fan-out on read shows, with a post racing the rebuild delivered
// once.
func testInactive(t *testing.T, open OpenFunc) {
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket, service.StrategyHybrid} {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			opts := service.Options{Strategy: st, InactiveAfter: 30 * 24 * time.Hour}
			svc, _ := newServiceWith(t, b, c, opts)
			author, reader, fresh := mustSignUp(t, svc, "author"), mustSignUp(t, svc, "reader"), mustSignUp(t, svc, "fresh")
			for _, u := range []*store.User{reader, fresh} {
				_, err := svc.Follow(ctx, u.ID, author.ID)
				require.NoError(t, err)
			}
			c.ms.Add((31 * 24 * time.Hour).Milliseconds())
			svc.Seen(ctx, fresh.ID) // fresh stays active; reader is idle
			for i := range 3 {
				_, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: fmt.Sprintf("while away %d", i)})
				require.NoError(t, err)
			}
			waitIdle(t, svc)
			items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: reader.ID, Layout: st.Layout(), Range: store.Forward(store.NilID, 10)})
			require.NoError(t, err)
			assert.Empty(t, items, "an idle user gets no entries")
			assert.Zero(t, counts.Total)
			assert.Equal(t, []string{"while away 2", "while away 1", "while away 0"}, inboxTexts(t, svc, fresh.ID, 10))

			// The reader returns to a process whose fan-out is not running
			// yet, so the rebuild is seen pending; a post races it.
			cctx, cancel := contextWithTimeout()
			defer cancel()
			require.NoError(t, svc.Close(cctx))
			svc2, _ := newServiceStopped(t, b, c, opts)
			svc2.Seen(ctx, reader.ID)
			page, err := svc2.Inbox(ctx, reader.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.True(t, page.Counts.Rebuilding, "rebuilding until the job is done")
			_, err = svc2.PostMessage(ctx, author.ID, service.PostInput{Text: "during the rebuild"})
			require.NoError(t, err)
			require.NoError(t, svc2.Start(ctx))
			waitIdle(t, svc2)

			page, err = svc2.Inbox(ctx, reader.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.False(t, page.Counts.Rebuilding)
			want := []string{"during the rebuild", "while away 2", "while away 1", "while away 0"}
			assert.Equal(t, want, inboxTexts(t, svc2, reader.ID, 10))
			assert.Equal(t, 4, page.Counts.Total)
			assert.Equal(t, 4, page.Counts.Unread)

			read, _ := newServiceWith(t, b, c, service.Options{Strategy: service.StrategyRead})
			assert.Equal(t, readTimeline(t, read, reader.ID), readTimeline(t, svc2, reader.ID), "the rebuilt inbox is what fan-out on read shows")
		})
	}
}

// testHybrid has an author cross the celebrity threshold in both
// directions while posting, with readers following at different times:
// every reader sees every item once, as fan-out on read would show it.
func testHybrid(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, _ := newServiceWith(t, b, c, service.Options{Strategy: service.StrategyHybrid, CelebrityThreshold: 2})
	author := mustSignUp(t, svc, "star")
	var fans []store.ID
	for i := range 4 {
		fans = append(fans, mustSignUp(t, svc, fmt.Sprintf("fan_%d", i)).ID)
	}
	n := 0
	post := func() {
		t.Helper()
		_, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: fmt.Sprintf("star %d", n)})
		require.NoError(t, err)
		n++
	}
	post()
	for _, f := range fans {
		_, err := svc.Follow(ctx, f, author.ID)
		require.NoError(t, err)
		post() // after the third follow the author is above the threshold
	}
	pulled := mustUser(t, b, author.ID).PulledCount
	assert.Equal(t, 2, pulled, "the posts made with 3 and 4 followers are pulled")
	_, err := svc.Unfollow(ctx, fans[0], author.ID)
	require.NoError(t, err)
	_, err = svc.Unfollow(ctx, fans[1], author.ID)
	require.NoError(t, err)
	post() // back to two followers: fanned out
	_, err = svc.Follow(ctx, fans[0], author.ID)
	require.NoError(t, err)
	post() // three again: pulled
	waitIdle(t, svc)

	read, _ := newServiceWith(t, b, c, service.Options{Strategy: service.StrategyRead})
	for i, f := range fans {
		got := readTimeline(t, svc, f)
		assert.Equal(t, readTimeline(t, read, f), got, "fan %d", i)
		seen := make(map[string]bool)
		for _, text := range got.Texts {
			assert.False(t, seen[text], "fan %d sees %q twice", i, text)
			seen[text] = true
		}
		if i != 1 {
			assert.Len(t, got.Texts, n, "fan %d follows the author and sees every post", i)
		} else {
			assert.Empty(t, got.Texts, "fan 1 unfollowed the author")
		}
	}
}

// testFollowWhilePosting has readers follow an author while the author
// posts, concurrently, under each strategy that stores inboxes: a post
// reaches a new follower by its delivery job or by the follow's backfill,
// never both and never neither, so every reader ends with every post
// exactly once, as fan-out on read shows it. Under hybrid (threshold 3)
// the author crosses the threshold midway.
func testFollowWhilePosting(t *testing.T, open OpenFunc) {
	const readers, posts = 8, 20
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket, service.StrategyHybrid} {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st, CelebrityThreshold: 3})
			author := mustSignUp(t, svc, "author")
			ids := make([]store.ID, readers)
			for i := range ids {
				ids[i] = mustSignUp(t, svc, fmt.Sprintf("reader_%d", i)).ID
			}
			errs := make(chan error, readers+1)
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range posts {
					if _, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: fmt.Sprintf("post %02d", i)}); err != nil {
						errs <- err
						return
					}
				}
			})
			for _, id := range ids {
				wg.Go(func() {
					if _, err := svc.Follow(ctx, id, author.ID); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			waitIdle(t, svc)

			var want []string
			for i := posts - 1; i >= 0; i-- {
				want = append(want, fmt.Sprintf("post %02d", i))
			}
			read, _ := newServiceWith(t, b, c, service.Options{Strategy: service.StrategyRead})
			for i, id := range ids {
				got := readTimeline(t, svc, id)
				assert.Equal(t, timeline{Texts: want, Total: posts, Unread: posts}, got, "reader %d", i)
				assert.Equal(t, readTimeline(t, read, id), got, "reader %d, against fan-out on read", i)
			}
		})
	}
}

// testEdgeCases covers what a reviewer found wrong once: marking an empty
// inbox read (which once stalled fan-out on MongoDB), two quick edits of
// one message (the second's notice was once dropped as a duplicate), and a
// cache holding an author no longer followed.
func testEdgeCases(t *testing.T, open OpenFunc) {
	for _, st := range service.Strategies {
		t.Run("MarkEmptyRead/"+string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st})
			author, reader := mustSignUp(t, svc, "author"), mustSignUp(t, svc, "reader")
			_, err := svc.Follow(ctx, reader.ID, author.ID)
			require.NoError(t, err)
			counts, err := svc.MarkInboxRead(ctx, reader.ID)
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{}, counts)
			_, err = svc.PostMessage(ctx, author.ID, service.PostInput{Text: "after an empty mark"})
			require.NoError(t, err)
			waitIdle(t, svc)
			assert.Equal(t, timeline{Texts: []string{"after an empty mark"}, Total: 1, Unread: 1}, readTimeline(t, svc, reader.ID))
		})
	}
	t.Run("TwoEdits", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		svc, _ := newService(t, b, c)
		author, reader := mustSignUp(t, svc, "author"), mustSignUp(t, svc, "reader")
		_, err := svc.Follow(ctx, reader.ID, author.ID)
		require.NoError(t, err)
		m, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: "v1"})
		require.NoError(t, err)
		waitIdle(t, svc)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, err := svc.Subscribe(sctx, reader.ID)
		require.NoError(t, err)
		for _, text := range []string{"v2", "v3"} {
			_, err := svc.EditMessage(ctx, author.ID, m.ID, text)
			require.NoError(t, err)
		}
		for range 2 {
			ev := nextEvent(t, events)
			assert.Equal(t, store.EventEdited, ev.Type)
			assert.Equal(t, m.ID, ev.MessageID)
		}
	})
	t.Run("CacheOfUnfollowedAuthor", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		svc, _ := newServiceWith(t, b, c, service.Options{Strategy: service.StrategyCache})
		kept, gone, reader := mustSignUp(t, svc, "kept"), mustSignUp(t, svc, "gone"), mustSignUp(t, svc, "reader")
		for _, a := range []*store.User{kept, gone} {
			_, err := svc.Follow(ctx, reader.ID, a.ID)
			require.NoError(t, err)
			_, err = svc.PostMessage(ctx, a.ID, service.PostInput{Text: a.Handle})
			require.NoError(t, err)
		}
		waitIdle(t, svc)
		require.Equal(t, []string{"gone", "kept"}, readTimeline(t, svc, reader.ID).Texts, "the cache is built")
		// The edge goes without the service dropping the cache, as when an
		// unfollow lands between a cache build's steps.
		_, err := b.Unfollow(ctx, reader.ID, gone.ID)
		require.NoError(t, err)
		assert.Equal(t, timeline{Texts: []string{"kept"}, Total: 1, Unread: 1}, readTimeline(t, svc, reader.ID))
	})
}
