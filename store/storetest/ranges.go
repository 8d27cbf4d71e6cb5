package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// testRanges checks every ranged read against what its store.Range selects
// from the whole list: forward and backward (Reverse), from the list's
// ends and from every item, at sizes smaller and larger than the list.
func testRanges(t *testing.T, open OpenFunc) {
	t.Run("Follows", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		star := mustCreateUser(t, b, c)
		var fans []store.ID
		for range 6 {
			u := mustCreateUser(t, b, c)
			mustFollow(t, b, c, u.ID, star.ID)
			mustFollow(t, b, c, star.ID, u.ID)
			fans = append(fans, u.ID)
		}
		checkRanges(t, fans, false, func(r store.Range) []store.ID {
			ids, err := b.ListFollowers(ctx, star.ID, r)
			require.NoError(t, err)
			return ids
		})
		checkRanges(t, fans, false, func(r store.Range) []store.ID {
			ids, err := b.ListFollowing(ctx, star.ID, r)
			require.NoError(t, err)
			return ids
		})
	})
	t.Run("UsersByAttribute", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		var want []store.ID
		for i := range 8 {
			u := mustCreateUser(t, b, c)
			value := "red"
			if i%3 == 1 {
				value = "blue" // not on the list: ranges must skip them
			}
			_, err := b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "color", Value: &value}})
			require.NoError(t, err)
			if value == "red" {
				want = append(want, u.ID)
			}
		}
		checkRanges(t, want, false, func(r store.Range) []store.ID {
			us, err := b.FindUsersByAttribute(ctx, "color", "red", r)
			require.NoError(t, err)
			return ids(us, func(u *store.User) store.ID { return u.ID })
		})
	})
	t.Run("Messages", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		author, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		var want []store.ID
		for i := range 6 {
			want = append(want, storeMessage(t, b, c, author.ID).ID)
			if i%2 == 0 {
				storeMessage(t, b, c, other.ID) // another outbox, interleaved
			}
		}
		slices.Reverse(want)
		checkRanges(t, want, true, func(r store.Range) []store.ID {
			ms, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: author.ID, Range: r})
			require.NoError(t, err)
			return idsOf(ms...)
		})
	})
	t.Run("Outbox", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		a1, a2, a3 := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		var want []store.ID
		for i := range 9 {
			author := []*store.User{a1, a2, a3}[i%3]
			m := storeMessage(t, b, c, author.ID)
			if author != a3 { // a3 is not read
				want = append(want, m.ID)
			}
		}
		slices.Reverse(want)
		checkRanges(t, want, true, func(r store.Range) []store.ID {
			es, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{a1.ID, a2.ID}, Range: r})
			require.NoError(t, err)
			return outboxIDs(es)
		})
	})
	// Inboxes: buckets of 50 are crossed, and entries that arrive late (a
	// follow's backfill) join older buckets, so a range starts inside a
	// bucket that also holds entries on the other side of its cursor.
	forStoredLayouts(t, open, "Inbox", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		owner, early, late := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		var lateMsgs []*store.Message
		for i := range 120 {
			if i%4 == 0 {
				lateMsgs = append(lateMsgs, storeMessage(t, b, c, late.ID))
				continue
			}
			post(t, b, c, l, early.ID, owner.ID)
		}
		follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, late.ID)
		require.NoError(t, b.StoreJob(ctx, follow))
		_, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(lateMsgs...), At: c.Now()})
		require.NoError(t, err)
		want, counts := inboxOf(t, b, owner.ID, l)
		require.Len(t, want, 120)
		require.Equal(t, 120, counts.Total)
		checkRanges(t, want, true, func(r store.Range) []store.ID {
			items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: r})
			require.NoError(t, err)
			return itemIDs(items)
		})
	})
}

// checkRanges requires read to return, for Ranges forward and backward
// from each end of list and from a sample of its items, at several sizes,
// exactly the items of list the Range selects, nearest to its cursor
// first. newestFirst tells list's order.
func checkRanges(t *testing.T, list []store.ID, newestFirst bool, read func(store.Range) []store.ID) {
	t.Helper()
	cursors := []store.ID{store.NilID}
	step := max(1, len(list)/12) // every item of a short list, a sample of a long one
	for i := 0; i < len(list); i += step {
		cursors = append(cursors, list[i])
	}
	cursors = append(cursors, list[len(list)-1])
	for _, from := range cursors {
		for _, limit := range []int{1, 3, 49, 51, len(list) + 1} {
			for _, reverse := range []bool{false, true} {
				r := store.Range{From: from, Limit: limit, Reverse: reverse}
				var want []store.ID
				for _, id := range list {
					if r.Admits(id, newestFirst) {
						want = append(want, id)
					}
				}
				if reverse {
					slices.Reverse(want)
				}
				want = want[:min(limit, len(want))]
				got := read(r)
				if len(want) == 0 {
					want = nil
				}
				if len(got) == 0 {
					got = nil
				}
				require.Equal(t, want, got, fmt.Sprintf("range %+v", r))
			}
		}
	}
}
