package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// testGroupCommit runs bursts of small delivery jobs, which the fan-out
// stores several at a time where the backend can (storage.GroupDeliverer).
func testGroupCommit(t *testing.T, open OpenFunc, st service.Strategy) {
	l := st.Layout()
	t.Run("ManySmallPosts", func(t *testing.T) {
		raw := openBackend(t, open)
		counting := NewCounting(raw)
		var b storage.Backend = counting
		c := newClock()
		reader := mustCreateUser(t, b, c).ID
		// 12 authors of two followers each: the reader and one other; the
		// chunk (7) holds three of their jobs.
		var authors, others []store.ID
		for range 12 {
			a, o := mustCreateUser(t, b, c).ID, mustCreateUser(t, b, c).ID
			mustFollow(t, b, c, reader, a)
			mustFollow(t, b, c, o, a)
			authors, others = append(authors, a), append(others, o)
		}
		svc, _ := newServiceStopped(t, b, c, service.Options{Strategy: st})
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, err := svc.Subscribe(sctx, reader)
		require.NoError(t, err)
		var posted []store.ID
		for i, a := range authors {
			m, err := svc.PostMessage(ctx, a, service.PostInput{Text: fmt.Sprintf("post %d", i)})
			require.NoError(t, err)
			posted = append(posted, m.ID)
		}
		counting.Reset()
		require.NoError(t, svc.Start(ctx))
		waitIdle(t, svc)

		var got []store.ID
		for i := range posted {
			select {
			case ev := <-events:
				require.Equal(t, store.EventAdded, ev.Type)
				got = append(got, ev.MessageID)
				assert.Equal(t, store.InboxCounts{Total: i + 1, Unread: i + 1}, ev.Counts, "each event counts the posts before it")
			case <-time.After(5 * time.Second):
				t.Fatalf("%d events of %d", i, len(posted))
			}
		}
		assert.Equal(t, posted, got, "the reader hears of the posts in posting order")
		ids, counts := inboxOf(t, b, reader, l)
		assert.Len(t, ids, len(posted))
		assert.Equal(t, store.InboxCounts{Total: len(posted), Unread: len(posted)}, counts)
		for i, o := range others {
			ids, counts := inboxOf(t, b, o, l)
			assert.Equal(t, []store.ID{posted[i]}, ids)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts)
		}
		assert.Equal(t, uint64(2*len(posted)), svc.Stats().Delivered)
		assert.Equal(t, uint64(len(posted)), svc.Stats().JobsDone[storage.JobDeliver])
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)

		calls, _ := counting.Snapshot()
		if _, groups := raw.(storage.GroupDeliverer); groups {
			// Three jobs a group: four steps, none alone.
			assert.Equal(t, int64(4), calls["DeliverInboxes"], "the small jobs are stored in groups")
			assert.Zero(t, calls["DeliverInbox"])
		} else {
			assert.Equal(t, int64(len(posted)), calls["DeliverInbox"], "a chunk a job")
		}
	})
	t.Run("PostThenDelete", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st})
		var authors, followers []store.ID
		for range 4 {
			authors = append(authors, mustCreateUser(t, b, c).ID)
		}
		for range 2 {
			f := mustCreateUser(t, b, c).ID
			for _, a := range authors {
				mustFollow(t, b, c, f, a)
			}
			followers = append(followers, f)
		}
		// One burst: each author posts twice and deletes the first, while
		// the fan-out runs.
		var kept []store.ID
		for round := range 3 {
			for i, a := range authors {
				first, err := svc.PostMessage(ctx, a, service.PostInput{Text: fmt.Sprintf("first %d %d", round, i)})
				require.NoError(t, err)
				second, err := svc.PostMessage(ctx, a, service.PostInput{Text: fmt.Sprintf("second %d %d", round, i)})
				require.NoError(t, err)
				require.NoError(t, svc.DeleteMessage(ctx, a, first.ID))
				kept = append(kept, second.ID)
			}
		}
		waitIdle(t, svc)
		// And the retraction of messages delivered in groups.
		require.NoError(t, svc.DeleteMessage(ctx, authors[0], kept[0]))
		require.NoError(t, svc.DeleteMessage(ctx, authors[1], kept[1]))
		waitIdle(t, svc)
		kept = kept[2:]
		for _, f := range followers {
			ids, counts := inboxOf(t, b, f, l)
			assert.ElementsMatch(t, kept, ids, "nothing deleted is left")
			assert.Equal(t, store.InboxCounts{Total: len(kept), Unread: len(kept)}, counts)
		}
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
	})
}
