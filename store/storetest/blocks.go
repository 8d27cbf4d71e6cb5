package storetest

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testBlocks(t *testing.T, open OpenFunc) {
	t.Run("BlockAndUnblock", func(t *testing.T) { testBlockAndUnblock(t, open) })
	t.Run("NeverBlocked", func(t *testing.T) { testNeverBlocked(t, open) })
	t.Run("Lists", func(t *testing.T) { testBlockLists(t, open) })
	t.Run("Blockers", func(t *testing.T) { testBlockers(t, open) })
	t.Run("Filtered", func(t *testing.T) { testBlockFiltered(t, open) })
	t.Run("Refused", func(t *testing.T) { testBlockRefused(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testBlocksConcurrent(t, open) })
	t.Run("ListBlockers", func(t *testing.T) { testListBlockers(t, open) })
	t.Run("HiddenAtHome", func(t *testing.T) { testHiddenAtHome(t, open) })
	t.Run("AtHome", func(t *testing.T) { testBlocksAtHome(t, open) })
	t.Run("Costs", func(t *testing.T) { testBlockCosts(t, open) })
	t.Run("MuteJobResumes", func(t *testing.T) { testMuteJobResumes(t, open) })
	t.Run("HideReposts", func(t *testing.T) { testHideReposts(t, open) })
	t.Run("HideRepostsResumes", func(t *testing.T) { testHideRepostsResumes(t, open) })
}

var (
	block = store.RelationBlock
	mute  = store.RelationMute
)

func findBlocked(t *testing.T, b storage.Backend, user store.ID, kind store.RelationKind, targets ...store.ID) []bool {
	t.Helper()
	got, err := b.FindBlocked(ctx, user, kind, targets)
	require.NoError(t, err)
	return got
}

// testNeverBlocked checks the flag that spares a reader the read of who
// blocks them: stored at creation, cleared by the first block of the
// user and by nothing else, and never set again.
func testNeverBlocked(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me, troll, bore := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	never := func() []bool {
		t.Helper()
		us, err := b.FindUsersByIDs(ctx, []store.ID{me.ID, troll.ID, bore.ID})
		require.NoError(t, err)
		out := make([]bool, len(us))
		for i, u := range us {
			out[i] = u.NeverBlocked
		}
		return out
	}
	assert.Equal(t, []bool{true, true, true}, never(), "as created")
	_, err := b.Block(ctx, me.ID, bore.ID, mute, c.Now())
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true}, never(), "a mute hides nothing from the muted")
	_, err = b.Block(ctx, me.ID, troll.ID, block, c.Now())
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true}, never(), "the blocked user only")
	_, err = b.Unblock(ctx, me.ID, troll.ID, block)
	require.NoError(t, err)
	u, err := b.FindUserByID(ctx, troll.ID)
	require.NoError(t, err)
	assert.False(t, u.NeverBlocked, "an unblock does not bring it back")
	_, err = b.Block(ctx, me.ID, store.NewID(c.Now()), block, c.Now())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "an unknown target")
}

func testBlockAndUnblock(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me, troll, bore := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)

	ok, err := b.Block(ctx, me.ID, troll.ID, block, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.Block(ctx, me.ID, troll.ID, block, c.Now())
	require.NoError(t, err)
	assert.False(t, ok, "a second block changes nothing")
	ok, err = b.Block(ctx, me.ID, bore.ID, mute, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)

	assert.Equal(t, []bool{true, false, false}, findBlocked(t, b, me.ID, block, troll.ID, bore.ID, me.ID), "aligned with the targets")
	assert.Equal(t, []bool{false, true}, findBlocked(t, b, me.ID, mute, troll.ID, bore.ID), "kinds are kept apart")
	assert.Equal(t, []bool{false}, findBlocked(t, b, troll.ID, block, me.ID), "a block is one way")
	assert.Empty(t, findBlocked(t, b, me.ID, block))
	blocked, err := b.ListBlocked(ctx, me.ID, block, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, blocked, 1, "the repeat stored no second edge")

	// Muting a blocked user is a second relation; unblocking leaves it.
	ok, err = b.Block(ctx, me.ID, troll.ID, mute, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.Unblock(ctx, me.ID, troll.ID, block)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.Unblock(ctx, me.ID, troll.ID, block)
	require.NoError(t, err)
	assert.False(t, ok, "a second unblock changes nothing")
	assert.Equal(t, []bool{false}, findBlocked(t, b, me.ID, block, troll.ID))
	assert.Equal(t, []bool{true}, findBlocked(t, b, me.ID, mute, troll.ID))
	blocked, err = b.ListBlocked(ctx, me.ID, block, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, blocked)

	// Blocked again: a new relation, listed at its new time.
	ok, err = b.Block(ctx, me.ID, troll.ID, block, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	blocked, err = b.ListBlocked(ctx, me.ID, block, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, blocked, 1)
	assert.Equal(t, store.Relation{ID: blocked[0].ID, UserID: me.ID, TargetID: troll.ID, Kind: block, CreatedAt: blocked[0].ID.Time()}, blocked[0],
		"a relation's time is its ID's")
}

func relationTargets(rs []store.Relation) []store.ID {
	out := make([]store.ID, len(rs))
	for i, r := range rs {
		out[i] = r.TargetID
	}
	return out
}

func testBlockLists(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me := mustCreateUser(t, b, c)
	var others []*store.User
	for range 4 {
		others = append(others, mustCreateUser(t, b, c))
	}
	// Blocked out of ID order; the list is by relation, newest first.
	for _, i := range []int{2, 0, 3, 1} {
		ok, err := b.Block(ctx, me.ID, others[i].ID, block, c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := b.Block(ctx, me.ID, others[0].ID, mute, c.Now())
	require.NoError(t, err)
	require.True(t, ok)

	all, err := b.ListBlocked(ctx, me.ID, block, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{others[1].ID, others[3].ID, others[0].ID, others[2].ID}, relationTargets(all))
	page, err := b.ListBlocked(ctx, me.ID, block, store.Forward(all[1].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, relationTargets(all[2:4]), relationTargets(page))
	back, err := b.ListBlocked(ctx, me.ID, block, store.Backward(all[3].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{others[0].ID, others[3].ID}, relationTargets(back), "backward: nearest first")
	first, err := b.ListBlocked(ctx, me.ID, block, store.Forward(store.NilID, 1))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{others[1].ID}, relationTargets(first), "the limit holds")

	muted, err := b.ListBlocked(ctx, me.ID, mute, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{others[0].ID}, relationTargets(muted), "kinds are listed apart")
	assert.Equal(t, mute, muted[0].Kind)
	theirs, err := b.ListBlocked(ctx, others[0].ID, block, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, theirs, "the list is the blocker's only")
}

func testBlockers(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, blocker, muter, both, none := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	for _, r := range []struct {
		user *store.User
		kind store.RelationKind
	}{{blocker, block}, {muter, mute}, {both, block}, {both, mute}} {
		ok, err := b.Block(ctx, r.user.ID, author.ID, r.kind, c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	// The author blocks none back: FindBlockers is the owners' side only.
	ok, err := b.Block(ctx, none.ID, blocker.ID, block, c.Now())
	require.NoError(t, err)
	require.True(t, ok)

	got, err := b.FindBlockers(ctx, author.ID, []store.ID{none.ID, both.ID, blocker.ID, muter.ID, blocker.ID})
	require.NoError(t, err)
	assert.Equal(t, []store.RelationKind{0, block | mute, block, mute, block}, got, "aligned with the owners, repeats answered")
	got, err = b.FindBlockers(ctx, blocker.ID, []store.ID{author.ID, none.ID})
	require.NoError(t, err)
	assert.Equal(t, []store.RelationKind{0, block}, got)
	got, err = b.FindBlockers(ctx, author.ID, nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	ok, err = b.Unblock(ctx, both.ID, author.ID, block)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.Unblock(ctx, muter.ID, author.ID, mute)
	require.NoError(t, err)
	require.True(t, ok)
	got, err = b.FindBlockers(ctx, author.ID, []store.ID{both.ID, muter.ID})
	require.NoError(t, err)
	assert.Equal(t, []store.RelationKind{mute, 0}, got, "an unblock leaves the other kind")
}

func testBlockFiltered(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me := mustCreateUser(t, b, c)
	var others []store.ID
	for range 5 {
		others = append(others, mustCreateUser(t, b, c).ID)
	}
	none, err := b.ListFiltered(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Empty(t, none)
	// 0 and 2 blocked, 1 and 2 muted, 4 blocked by someone else.
	for _, r := range []struct {
		user, target store.ID
		kind         store.RelationKind
	}{{me.ID, others[2], block}, {me.ID, others[1], mute}, {me.ID, others[0], block}, {me.ID, others[2], mute}, {others[3], others[4], block}} {
		ok, err := b.Block(ctx, r.user, r.target, r.kind, c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	want := []store.ID{others[0], others[1], others[2]}
	slices.SortFunc(want, store.ID.Compare)
	got, err := b.ListFiltered(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, want, got, "both kinds, each user once, in ID order")
	got, err = b.ListFiltered(ctx, me.ID, 2)
	require.NoError(t, err)
	assert.Equal(t, want[:2], got, "the limit holds, counting users")
	got, err = b.ListFiltered(ctx, me.ID, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func testBlockRefused(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	_, err := b.Block(ctx, me.ID, me.ID, block, c.Now())
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "blocking oneself")
	_, err = b.Block(ctx, me.ID, me.ID, mute, c.Now())
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "muting oneself")
	_, err = b.Block(ctx, me.ID, other.ID, block|mute, c.Now())
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "two kinds at once")
	_, err = b.Block(ctx, me.ID, other.ID, 0, c.Now())
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "no kind")
	_, err = b.Unblock(ctx, me.ID, other.ID, block|mute)
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "unblocking two kinds at once")
	_, err = b.Block(ctx, me.ID, store.NewID(c.Now()), block, c.Now())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "an unknown target")
	assert.Equal(t, []bool{false}, findBlocked(t, b, me.ID, block, other.ID), "nothing refused was stored")
	filtered, err := b.ListFiltered(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Empty(t, filtered)
}

// testBlocksConcurrent races blocks of one pair and of one target by
// several users: each pair ends with one edge, listed and found from both
// sides.
func testBlocksConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	target := mustCreateUser(t, b, c)
	const users, racers = 4, 4
	var blockers []store.ID
	for range users {
		blockers = append(blockers, mustCreateUser(t, b, c).ID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := make(map[store.ID]int)
	for _, u := range blockers {
		for range racers {
			wg.Go(func() {
				ok, err := b.Block(ctx, u, target.ID, block, c.Now())
				assert.NoError(t, err)
				// A mute of the same pair races too, on its own edge.
				_, err = b.Block(ctx, u, target.ID, mute, c.Now())
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					won[u]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	got, err := b.FindBlockers(ctx, target.ID, blockers)
	require.NoError(t, err)
	for i, u := range blockers {
		assert.Equal(t, 1, won[u], "exactly one block of a pair reports a change")
		assert.Equal(t, block|mute, got[i])
		list, err := b.ListBlocked(ctx, u, block, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Equal(t, []store.ID{target.ID}, relationTargets(list), "one edge stored")
	}
}

// testListBlockers: who blocks a user, blocks only (not mutes), each once,
// in ID order, bounded.
func testListBlockers(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me := mustCreateUser(t, b, c)
	var others []store.ID
	for range 5 {
		others = append(others, mustCreateUser(t, b, c).ID)
	}
	got, err := b.ListBlockers(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	// 3 and 0 block me (0 mutes me too), 1 only mutes me, me blocks 2,
	// 4 blocks 2.
	for _, r := range []struct {
		user, target store.ID
		kind         store.RelationKind
	}{{others[3], me.ID, block}, {others[0], me.ID, mute}, {others[0], me.ID, block}, {others[1], me.ID, mute}, {me.ID, others[2], block}, {others[4], others[2], block}} {
		ok, err := b.Block(ctx, r.user, r.target, r.kind, c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	want := []store.ID{others[0], others[3]}
	slices.SortFunc(want, store.ID.Compare)
	got, err = b.ListBlockers(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, want, got, "blockers only, each once, in ID order")
	got, err = b.ListBlockers(ctx, me.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, want[:1], got, "the limit holds")
	got, err = b.ListBlockers(ctx, me.ID, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
	ok, err := b.Unblock(ctx, others[0], me.ID, block)
	require.NoError(t, err)
	require.True(t, ok)
	got, err = b.ListBlockers(ctx, me.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, []store.ID{others[3]}, got, "an unblock leaves the list; the mute left is no block")
}

// testHiddenAtHome: an outbox read under a home rule with hidden users
// leaves out their messages and others' reposts of their messages (the
// reader's own repost stays, as on the reader's profile), and counts as it
// reads.
func testHiddenAtHome(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	reader, friend, hidden := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	hp := storeMessage(t, b, c, hidden.ID)
	fp := storeMessage(t, b, c, friend.ID)
	fr := mustRepost(t, b, c, friend.ID, hp)
	own := mustRepost(t, b, c, reader.ID, hp)
	fp2 := storeMessage(t, b, c, friend.ID)
	ownPost := storeMessage(t, b, c, reader.ID)
	authors := []store.ID{friend.ID, hidden.ID, reader.ID}
	for _, tc := range []struct {
		name string
		rule *storage.HomeRule
		want []*store.Message
	}{
		{"no one hidden", storage.NewHomeRule(reader.ID, []store.ID{friend.ID, hidden.ID}), []*store.Message{ownPost, fp2, own, fp, hp}},
		{"no one hidden, not following", storage.NewHomeRule(reader.ID, []store.ID{friend.ID}), []*store.Message{ownPost, fp2, own, fr, fp, hp}},
		{"hidden", storage.NewHomeRule(reader.ID, []store.ID{friend.ID}).Hide([]store.ID{hidden.ID}), []*store.Message{ownPost, fp2, own, fp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 10), Home: tc.rule})
			require.NoError(t, err)
			assert.Equal(t, idsOf(tc.want...), ids(es, func(e storage.OutboxEntry) store.ID { return e.MessageID }))
			page, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 2), Home: tc.rule})
			require.NoError(t, err)
			assert.Len(t, page, 2, "a page of a filtered outbox stays full")
			n, err := b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, Home: tc.rule})
			require.NoError(t, err)
			assert.Equal(t, len(tc.want), n, "counted as read")
			n, err = b.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, After: fp.ID, Home: tc.rule})
			require.NoError(t, err)
			above := 0
			for _, m := range tc.want {
				if m.ID.Compare(fp.ID) > 0 {
					above++
				}
			}
			assert.Equal(t, above, n, "counted above a mark")
		})
	}
}
